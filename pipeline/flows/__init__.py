"""The application layer: one module per flow (migrate, pr, nightly, math, ...).

A flow strings the layers below it together: it reads the tree, plans, edits, runs, renders
and posts. Runners come in as parameters, so a test hands a flow its own. Nothing below this
package imports it; only ``tasks`` and ``commands`` do.
"""
