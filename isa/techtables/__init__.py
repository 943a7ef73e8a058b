"""Bundled technology tables (TOML), read by isa.techtable."""
