"""The desktop front ends: `nm-zones-settings` (a GTK 4 window) and `nm-zones-notify` (a
notification agent). Both are unprivileged clients of `nm-zones serve` on the system bus,
authorized by polkit. Installed with the `desktop` extra; nothing outside this package imports
it, so the core (and every server) never needs GTK."""
