"""Aliases: which entity names are one entity, found from name forms, rules and the view."""
