"""Prometheus exporter for lossless-fabric health (collectors, HTTP server, dashboards).

The collectors arrive with the exporter issue; the package exists so the layout of
DESIGN.md holds from the start.
"""
