"""Weight sync: moving trained weights into a running engine with no restart (docs/reefd.md)."""
