"""Community reports: the context a report is written from, its rows and evidence."""
