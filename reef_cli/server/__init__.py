"""`reef serve`: the recording proxy and the Reef API (imported only by `reef serve`)."""
