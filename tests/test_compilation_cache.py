"""The persistent compilation cache: where it goes, how to turn it off, and that a new process reuses it."""

import os
import subprocess
import sys

SCRIPT = """
import jax
import gpdsl.backends.jax.lowering  # turns the cache on
hits = []
jax.monitoring.register_event_listener(lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None)
print("DIR", jax.config.jax_compilation_cache_dir)
if jax.config.jax_compilation_cache_dir:
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    import jax.numpy as jnp
    print("VALUE", float(jax.jit(lambda x: jnp.sum(jnp.sin(x) ** 2))(jnp.arange(5.0))))
    print("HITS", len(hits))
"""


def run(tmp_path, **environment):
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "GPDSL_JAX_CACHE")}
    env.update(GPDSL_CACHE_DIR=str(tmp_path / "cache"), **environment)
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    return done.stdout


def test_programs_are_cached_under_the_gpdsl_cache_and_reused_by_the_next_process(tmp_path):
    out = run(tmp_path)
    assert f"DIR {tmp_path / 'cache' / 'jax'}" in out and "HITS 0" in out
    assert any((tmp_path / "cache" / "jax").iterdir())
    again = run(tmp_path)
    assert "HITS 0" not in again
    assert again.splitlines()[1] == out.splitlines()[1]  # the same value


def test_the_cache_can_be_turned_off(tmp_path):
    out = run(tmp_path, GPDSL_JAX_CACHE="0")
    assert "DIR None" in out
    assert not (tmp_path / "cache" / "jax").exists()


def test_a_cache_directory_given_to_jax_is_kept(tmp_path):
    mine = tmp_path / "mine"
    out = run(tmp_path, JAX_COMPILATION_CACHE_DIR=str(mine))
    assert f"DIR {mine}" in out
    assert not (tmp_path / "cache" / "jax").exists()


def test_an_entry_without_access_time_is_dropped_so_the_cache_keeps_working(tmp_path):
    directory = tmp_path / "cache" / "jax"
    directory.mkdir(parents=True)
    (directory / "jit_old-0123-cache").write_bytes(b"written without a size limit")
    out = run(tmp_path)
    assert not (directory / "jit_old-0123-cache").exists()
    assert any(path.name.endswith("-atime") for path in directory.iterdir())
    assert "HITS 0" in out and "HITS 0" not in run(tmp_path)
