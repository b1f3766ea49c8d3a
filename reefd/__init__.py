"""reefd: see DESIGN.md §2."""
