"""reefd: the optional GPU weight daemon: engines, weight sync, trainers and weight
recipes behind Reef's proxy (docs/reefd.md, docs/architecture.md)."""
