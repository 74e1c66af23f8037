"""How fast the mechanisms run: token and representation mechanisms, the NDD metric, adaptive pretraining."""
