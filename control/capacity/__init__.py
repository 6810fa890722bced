"""How many workers each pool should run, and getting that number to the engines.

`policy.desired_workers` computes it (today: what the admin stored on the pool);
agents read it in their pool spec and `specroute engine up` applies it on a host;
on Kubernetes `specroute control capacity` scales each pool's Deployment to it.
"""
