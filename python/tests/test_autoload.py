"""Backend "coll" without `import coll_torch`: torch's autoload of out-of-tree backends (the
"torch.backends" entry point the package installs) registers it at `import torch`, in a fresh
interpreter; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns that off, as torch documents."""

import os
import subprocess
import sys
import textwrap

from dist_util import free_port

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    def rank_main(rank, world, port):
        # No `import coll_torch` anywhere: the spawned interpreter imports torch only.
        dist.init_process_group("coll", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        t = torch.full((5,), float(rank + 1))
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((5,), float(world * (world + 1) // 2))), t
        assert dist.get_backend() == "coll", dist.get_backend()
        dist.destroy_process_group()

    if __name__ == "__main__":
        assert "coll_torch" in sys.modules, "autoload did not import coll_torch"
        assert "coll" in dist.Backend.backend_list, dist.Backend.backend_list
        mp.spawn(rank_main, args=(2, int(sys.argv[1])), nprocs=2, join=True)
        print("autoload ok")
    """
)


def run(env_extra, code, *args):
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=180)


def test_backend_coll_registered_by_import_torch(tmp_path):
    script = tmp_path / "autoload_main.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, str(script), str(free_port())], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "autoload ok" in p.stdout, p.stdout + p.stderr


def test_autoload_off():
    code = ("import sys, torch, torch.distributed as dist\n"
            "print('coll_torch' in sys.modules, 'coll' in dist.Backend.backend_list)\n"
            "import coll_torch\n"
            "print('coll' in dist.Backend.backend_list)\n")
    p = run({"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "False", "True"], p.stdout + p.stderr


def test_broken_install_does_not_break_import_torch(tmp_path):
    # A coll_torch that cannot load (e.g. libcoll gone): `import torch` still works, with a warning;
    # only `import coll_torch` raises.
    pkg = tmp_path / "coll_torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('libcoll.so.0: cannot open shared object file')\n")
    code = ("import warnings\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    import torch, torch.distributed as dist\n"
            "print('coll' in dist.Backend.backend_list)\n"
            "print(any('was not registered' in str(x.message) and 'libcoll' in str(x.message) for x in w))\n")
    path = os.pathsep.join([str(tmp_path)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    p = run({"PYTHONPATH": path}, code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "True"], p.stdout + p.stderr
