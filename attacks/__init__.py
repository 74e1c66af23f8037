"""Attacks: one module per attack, discovered by import (see bench.registry)."""
