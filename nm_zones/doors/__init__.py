"""The doors: thin front ends (the hook, the command line, the D-Bus service) that parse
their input and call the engine."""
