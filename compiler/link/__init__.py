"""Linking: segments into one program, and activations kept on chip."""
