"""Inference engines reefd serves through Reef's proxy: SGLang on GPU hosts, or the
built-in torch engine (``torch_server``) with the same weight-update endpoints, so one
client (``client.py``) drives both. ``launch.py`` starts or attaches them."""
