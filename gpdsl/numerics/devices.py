"""Where gpdsl's JAX engines run: the device a run chooses (``--device auto|cpu|gpu``), checked before it runs.

``auto`` is a GPU when JAX sees one, else the CPU. :func:`running_on` makes the chosen platform the run's: JAX's
default device, whose platform (:func:`run_platform`) the code traced under it reads: the driver splits chains over
that platform's devices (:func:`run_devices`: one per core on a CPU, each GPU on a GPU machine), and CPU-only
workarounds (:mod:`gpdsl.numerics.linalg`) apply on the CPU alone. JAX keys its trace caches on the default device,
so a trace made for one platform is never reused on another. JAX is imported only inside the functions, so the
command line can name the choices without it.
"""

from __future__ import annotations

from contextlib import contextmanager

from gpdsl.errors import GpdslError

DEVICE_CHOICES = ("auto", "cpu", "gpu")
"""The values of ``--device`` (and of the ``device`` keyword of :func:`gpdsl.run`)."""

CUDA_INSTALL = "pip install 'gpdsl[cuda]'"


class DeviceError(GpdslError, kind="device error"):
    """The device asked for is not one JAX can run on here."""


def resolve_device(choice: str) -> str:
    """The platform (``"cpu"`` or ``"gpu"``) a run with ``device=choice`` runs on.

    Parameters
    ----------
    choice : {"auto", "cpu", "gpu"}

    Returns
    -------
    str

    Raises
    ------
    DeviceError
        ``choice`` is not one of :data:`DEVICE_CHOICES`, or it is ``"gpu"`` and JAX sees no GPU (the message says
        what JAX sees and how to install its CUDA wheels).
    """
    if choice not in DEVICE_CHOICES:
        raise DeviceError(f"the device must be one of {', '.join(DEVICE_CHOICES)}; got {choice!r}")
    gpus = gpu_devices()
    if choice == "gpu" and not gpus:
        raise DeviceError(f"device gpu: JAX sees no GPU, only {_seen()}",
                          hint=f"install JAX's CUDA 12 wheels with {CUDA_INSTALL} (needs an NVIDIA driver for CUDA "
                               "12), or run with --device cpu (device='cpu')")
    if choice == "auto":
        return "gpu" if gpus else "cpu"
    return choice


def gpu_devices() -> list:
    """The GPUs JAX sees (none when its GPU plugin is not installed or finds no device)."""
    import jax

    try:
        return list(jax.devices("gpu"))
    except RuntimeError:
        return []


def run_devices() -> list:
    """The devices of the platform code runs on (:func:`run_platform`): the driver splits chains over them."""
    import jax

    return list(jax.devices(run_platform()))


def run_platform() -> str:
    """The platform code traced now runs on: that of JAX's default device (set by :func:`running_on` for a run),
    else JAX's default backend; ``"cpu"`` or ``"gpu"`` (or another backend's name)."""
    import jax

    device = jax.config.jax_default_device
    if device is None:
        return jax.default_backend()
    platform = device if isinstance(device, str) else device.platform
    return "gpu" if platform in ("cuda", "rocm") else platform


@contextmanager
def running_on(platform: str):
    """Run the enclosed code on ``platform`` (from :func:`resolve_device`): it becomes JAX's default device (the
    first of that platform's), and :func:`run_devices` gives that platform's devices."""
    import jax

    with jax.default_device(jax.devices(platform)[0]):
        yield


def device_attributes(platform: str) -> dict:
    """The results' attributes of a run on ``platform``: ``device`` and ``device_name`` (the first device's kind,
    e.g. ``NVIDIA H200``, with the number of devices when there are several GPUs)."""
    import jax

    devices = jax.devices(platform)
    kind = getattr(devices[0], "device_kind", "") or platform
    name = f"{kind} x {len(devices)}" if platform == "gpu" and len(devices) > 1 else kind
    return {"device": platform, "device_name": name}


def device_line(platform: str) -> str:
    """One line for standard error: the device a run runs on."""
    import jax

    attributes = device_attributes(platform)
    count = len(jax.devices(platform))
    shown = f"{count} host device{'s' if count != 1 else ''}" if platform == "cpu" else attributes["device_name"]
    return f"device: {platform} ({shown}; jax {jax.__version__})"


def _seen() -> str:
    import jax

    platforms: dict[str, int] = {}
    for device in jax.devices():
        platforms[device.platform] = platforms.get(device.platform, 0) + 1
    found = ", ".join(f"{count} {platform} device{'s' if count != 1 else ''}" for platform, count in platforms.items())
    return f"{found} (jax {jax.__version__}, jaxlib {_jaxlib_version()})"


def _jaxlib_version() -> str:
    try:
        import jaxlib

        return str(getattr(jaxlib, "__version__", "unknown"))
    except ImportError:
        return "not installed"
