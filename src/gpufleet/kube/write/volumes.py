"""A bound pod's unbound PersistentVolumeClaims written before its binding, as
kube-scheduler's VolumeBinding plugin does in PreBind.

For each claim the cycle gave a volume (:attr:`~gpufleet.scheduler.api.outcome.Binding.volumes`):

* a free PersistentVolume the cycle chose — its ``spec.claimRef`` is set to the claim
  (``apiVersion``, ``kind``, ``namespace``, ``name``, ``uid``), by a merge patch; the PV
  controller then completes the binding (the claim's ``spec.volumeName``). Unlike
  kube-scheduler's update, the patch carries no ``resourceVersion`` precondition: the
  cache does not keep a volume's version, so a volume another binder took in the same
  instant is not detected here, and the PV controller settles that race;
* a volume to provision — the claim is annotated ``volume.kubernetes.io/selected-node``
  with the node, which tells the provisioner where the pod runs (the external
  provisioner's contract for ``WaitForFirstConsumer`` classes).

The pod is bound only after every write succeeded; a refused write (a 409 included) fails
the bind, which backs off like any other failed bind, and the next cycle judges the claim
again from what the watch then shows. What was written is not taken back, as
kube-scheduler does not: a claimRef to a claim whose pod went elsewhere is the PV
controller's to complete or release, and a selected node the provisioner's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from gpufleet.kube.read.kinds import object_path
from gpufleet.kube.write.bind import message_of
from gpufleet.load.objects.storage import SELECTED_NODE

MERGE = {"Content-Type": "application/merge-patch+json"}


async def bind_volumes(
    http: httpx.AsyncClient,
    volumes: Mapping[str, str],
    node: str,
    uids: Mapping[str, str],
) -> str:
    """Write each claim's volume (see the module doc); why one failed ("" if none did).
    ``uids``: per claim, its ``metadata.uid`` as the cache read it."""
    for claim, volume in sorted(volumes.items()):
        namespace, _, name = claim.partition("/")
        body: dict[str, Any]
        if volume:
            ref = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": namespace,
                "name": name,
                "uid": uids.get(claim, ""),
            }
            body = {"spec": {"claimRef": ref}}
            path, what = object_path("PersistentVolume", volume), f"PersistentVolume {volume}"
        else:
            body = {"metadata": {"annotations": {SELECTED_NODE: node}}}
            path, what = (
                object_path("PersistentVolumeClaim", claim),
                f"PersistentVolumeClaim {claim}",
            )
        try:
            reply = await http.patch(path, json=body, headers=MERGE)
        except httpx.HTTPError as exc:
            return f"writing {what}: {type(exc).__name__}"
        if reply.status_code >= 300:
            return f"writing {what}: {reply.status_code} {message_of(reply)}"
    return ""
