"""Trends: emerging communities and storylines over time windows."""
