"""adapters: see DESIGN.md §2."""
