"""The legacy x_tables backend: libiptc commits, python-iptables builds a rule never seen."""
