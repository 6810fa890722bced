"""Governed eval sets and the offline evaluations of pair versions run on them."""
