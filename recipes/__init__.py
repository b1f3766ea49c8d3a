"""recipes: see DESIGN.md §2."""
