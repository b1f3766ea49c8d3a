"""Weight sync: moving trained weights into a running engine with no restart (DESIGN §10)."""
