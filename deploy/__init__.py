"""Deployment files: container images (images/) and Kubernetes manifests (base/, overlays/)."""
