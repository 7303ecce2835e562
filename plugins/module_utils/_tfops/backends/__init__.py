"""One file per module, named after it (backends/<module>.py), each with the module's body
``run(ctx)`` that its main() hands to core/module.py's run: the top layer, which may use every
concern package and is used by none."""
