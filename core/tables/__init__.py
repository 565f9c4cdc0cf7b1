"""The graph's versioned Delta Lake tables: schema and codecs, merge-on-read, the store, its
maintenance, opening, and the conversion of the snapshot directories of earlier releases."""
