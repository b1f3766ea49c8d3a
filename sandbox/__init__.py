"""sandbox: see DESIGN.md §2."""
