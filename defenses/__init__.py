"""Defenses: one module per defense family, discovered by import (see bench.core.registry)."""
