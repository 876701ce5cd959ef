"""Wire-level mechanisms every family shares (parsers of formats that are not a family's own)."""
