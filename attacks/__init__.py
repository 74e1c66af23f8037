"""Attacks: one module per attack, discovered by import (see bench.core.registry)."""
