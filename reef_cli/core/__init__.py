"""Reef's core: paths, config, errors, harness trees, the release chain, the gate.

Core modules never import the CLI, the server, adapters or recipes.
"""
