"""KubeRay's ``ray.io/v1`` RayCluster and RayJob, run as local Ray clusters (``kuberay.kinds`` names them)."""
