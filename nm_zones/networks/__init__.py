"""Known networks: which network a connection reached (identity.py, neighbours.py), the
networks nm-zones has seen and the zones they were given (store.py), and the zone that
follows from them (zone.py)."""
