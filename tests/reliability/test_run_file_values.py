"""Run files (issue 40): a value of the wrong type, an output pattern that names no grid key or holds a stray brace,
runs that share a file, a comparison of unknown variables or onto its own table are refused in one line naming the
run and the value, before any run starts: ``gpdsl run --dry-run`` and ``gpdsl run`` alike exit 1 and write
nothing."""

import pytest

from tests.reliability.helpers import make_work, no_internal_error, refused

BASE = 'model = "gp_classification.gpm"\ndata = "cls.json"\nmethod = "pm"\nseed = 1\n'
GRID = 'grid = { approximation = ["ep", "laplace"] }\n'


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return make_work(tmp_path_factory.mktemp("run_files"))


def run_file(work, text, name="runs.toml"):
    path = work / name
    path.write_text(text)
    return path


def assert_nothing_written(work):
    assert not list(work.glob("*.nc")) and not list(work.glob("*.npz")) and not list(work.glob("*.md"))


PATTERNS = [
    ("a grid key and an unknown name", 'out = "pm_{approximation}_{nope}.nc"\n' + GRID, "names {nope}"),
    ("a stray opening brace", 'out = "pm_{approximation}{.nc"\n' + GRID, "is not a pattern"),
    ("a stray closing brace", 'out = "pm_{approximation}}.nc"\n' + GRID, "is not a pattern"),
    ("a positional field", 'out = "pm_{approximation}_{0}.nc"\n' + GRID, "names {0}"),
    ("an empty field", 'out = "pm_{approximation}_{}.nc"\n' + GRID, "names {}"),
    ("an attribute", 'out = "pm_{approximation}_{approximation.real}.nc"\n' + GRID, "names {approximation.real}"),
    ("an index", 'out = "pm_{approximation[0]}.nc"\n' + GRID, "names {approximation[0]}"),
    ("a conversion", 'out = "pm_{approximation!z}.nc"\n' + GRID, "has a conversion or format"),
    ("a format", 'out = "pm_{approximation:q}.nc"\n' + GRID, "has a conversion or format"),
    ("a huge width", 'out = "pm_{seed:>999999999999}.nc"\n', "has a conversion or format"),
    ("an unknown name without a grid", 'out = "pm_{nope}.nc"\n', "names {nope}"),
    ("a lone brace without a grid", 'out = "pm_{.nc"\n', "is not a pattern"),
    ("a checkpoint's unknown name", 'out = "pm.nc"\ncheckpoint = "c_{nope}.npz"\n', "checkpoint 'c_{nope}.npz'"),
    ("a checkpoint's stray brace", 'out = "pm.nc"\ncheckpoint = "c_}.npz"\n', "checkpoint 'c_}.npz'"),
    ("a grid key missing from out", 'out = "pm.nc"\n' + GRID, "does not name the grid key 'approximation'"),
]


@pytest.mark.parametrize("text, culprit", [p[1:] for p in PATTERNS], ids=[p[0] for p in PATTERNS])
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry run", "run"])
def test_output_patterns_are_checked_before_any_run(work, capsys, text, culprit, dry_run):
    path = run_file(work, BASE + text)
    refused(["run", path, *(["--dry-run"] if dry_run else [])], capsys, culprit, one_line=True)
    assert_nothing_written(work)


def test_a_pattern_may_use_the_method_the_seed_and_literal_braces(work, capsys):
    path = run_file(work, BASE + 'out = "{method}_{seed}_{approximation}_{{x}}.nc"\n'
                    'checkpoint = "{approximation}.npz"\n' + GRID)
    status, err = no_internal_error(["run", path, "--dry-run"], capsys, statuses=(0,))
    assert "pm_1_ep_{x}.nc" in err and "pm_1_laplace_{x}.nc" in err


TYPES = [
    ("out a number", 'out = 3\n', "out must be a string; got 3"),
    ("out a list", 'out = ["a.nc"]\n', "out must be a string"),
    ("out a table", 'out = { a = 1 }\n', "out must be a string"),
    ("out a date", 'out = 1979-05-27\n', "out must be a string"),
    ("out empty", 'out = ""\n', "out is empty"),
    ("out with a NUL", 'out = "a\\u0000.nc"\n', "out holds a NUL character"),
    ("name a number", 'out = "a.nc"\nname = 3\n', "name must be a string"),
    ("predict a number", 'out = "a.nc"\npredict = 3\n', "predict must be a string"),
    ("checkpoint a number", 'out = "a.nc"\ncheckpoint = 3\n', "checkpoint must be a string"),
    ("checkpoint empty", 'out = "a.nc"\ncheckpoint = ""\n', "checkpoint is empty"),
    ("compare a list", 'out = "a.nc"\ncompare = [1]\n', "'compare' must be a table"),
    ("compare table a number", 'out = "a.nc"\n[compare]\ntable = 3\n', "table must be a string; got 3"),
    ("compare plot a number", 'out = "a.nc"\n[compare]\nplot = 3\n', "plot must be a string"),
    ("compare reference a number", 'out = "a.nc"\n[compare]\nreference = 3\n', "reference must be a string"),
    ("compare table empty", 'out = "a.nc"\n[compare]\ntable = ""\n', "table is empty"),
    ("compare vars a number", 'out = "a.nc"\n[compare]\nvars = 3\n', "vars must be a list of variable names"),
    ("compare vars a string", 'out = "a.nc"\n[compare]\nvars = "sigma"\n', "vars must be a list"),
    ("compare vars numbers", 'out = "a.nc"\n[compare]\nvars = [1]\n', "vars must be a list"),
    ("compare vars empty", 'out = "a.nc"\n[compare]\nvars = []\n', "vars must be a list"),
    ("scheduler a number", 'out = "a.nc"\nscheduler = 3\n', "scheduler must be"),
    ("scheduler no address", 'out = "a.nc"\nscheduler = "two words"\n', "--scheduler 'two words'"),
    ("run a table", 'run = { method = "pm" }\n', "'run' must be an array of tables"),
    ("run numbers", 'run = [1, 2]\n', "'run' must be an array of tables"),
    ("settings a list", 'out = "a.nc"\nsettings = [1]\n', "settings must be a table"),
    ("settings a date", 'out = "a.nc"\nsettings = { chains = 1979-05-27 }\n', "chains must be an integer"),
    ("grid a list", 'out = "a_{x}.nc"\ngrid = [1]\n', "grid must be a table of non-empty lists"),
    ("grid of tables", 'out = "a_{chains}.nc"\ngrid = { chains = [{ a = 1 }] }\n', "chains must be an integer"),
    ("grid of a setting of no method", 'out = "a_{chainz}.nc"\ngrid = { chainz = [1, 2] }\n', "'chainz' is not a setting"),
    ("grid of methods", 'out = "a_{method}.nc"\ngrid = { method = [3, 4] }\n', "unknown method '3'"),
    ("grid of seeds", 'out = "a_{seed}.nc"\ngrid = { seed = [1, -1] }\n', "the seed must be an integer"),
    ("allow_external a string", 'out = "a.nc"\nallow_external = "yes"\n', "a run file cannot set allow_external"),
    ("chain_groups a string", 'out = "a.nc"\nchain_groups = "2"\n', "chain_groups must be an integer"),
]


@pytest.mark.parametrize("text, culprit", [t[1:] for t in TYPES], ids=[t[0] for t in TYPES])
def test_values_of_the_wrong_type_are_refused_naming_the_key(work, capsys, text, culprit):
    refused(["run", run_file(work, BASE + text), "--dry-run"], capsys, culprit, one_line=True)


@pytest.mark.parametrize("key, text, culprit", [
    ("model", 'model = 3\n', "model must be a string; got 3"),
    ("model", 'model = []\n', "model must be a string"),
    ("data", 'data = 3\n', "data must be a file name or a table"),
    ("data", 'data = [1, 2]\n', "data must be a file name or a table"),
    ("data", 'data = "a\\u0000.json"\n', "data holds a NUL character"),
    ("data", 'data = { N = "x" }\n', "data 'N' must be numeric"),
    ("data", 'data = {}\n', "data 'X' is missing"),
    ("method", 'method = 3\n', "method must be a string"),
    ("method", 'method = ["pm"]\n', "method must be a string"),
    ("seed", 'seed = "1"\n', "the seed must be an integer"),
    ("seed", 'seed = 1.5\n', "the seed must be an integer"),
    ("seed", 'seed = true\n', "the seed must be an integer"),
    ("seed", 'seed = 9223372036854775807\n', "the seed must be an integer"),
])
def test_the_run_keys_are_refused_of_the_wrong_type(work, capsys, key, text, culprit):
    lines = [line for line in BASE.splitlines(keepends=True) if not line.startswith(key)]
    refused(["run", run_file(work, "".join(lines) + text + 'out = "a.nc"\n'), "--dry-run"], capsys, culprit,
            one_line=True)


SHARED = [
    ("a grid sharing a checkpoint", 'out = "pm_{approximation}.nc"\ncheckpoint = "c.npz"\n' + GRID, "c.npz"),
    ("two runs sharing a checkpoint",
     '[[run]]\nout = "a.nc"\ncheckpoint = "c.npz"\n[[run]]\nout = "b.nc"\ncheckpoint = "c.npz"\n', "c.npz"),
    ("a checkpoint that is its run's out", 'out = "a.nc"\ncheckpoint = "a.nc"\n', "a.nc"),
    ("a checkpoint that is another run's out",
     '[[run]]\nout = "a.nc"\ncheckpoint = "b.nc"\n[[run]]\nout = "b.nc"\nmethod = "gibbs"\n', "b.nc"),
    ("an out that is another run's checkpoint",
     '[[run]]\nout = "a.nc"\ncheckpoint = "c.npz"\n[[run]]\nout = "c.npz"\n', "c.npz"),
    ("two runs sharing an out", '[[run]]\nout = "a.nc"\n[[run]]\nout = "a.nc"\nmethod = "gibbs"\n', "a.nc"),
]


@pytest.mark.parametrize("text, culprit", [s[1:] for s in SHARED], ids=[s[0] for s in SHARED])
def test_runs_that_share_a_file_are_refused_before_any_run(work, capsys, text, culprit):
    err = refused(["run", run_file(work, BASE + text)], capsys, "several runs write")
    assert culprit in err
    assert_nothing_written(work)


COMPARE = [
    ("vars naming no variable", '[compare]\nvars = ["nope"]\n', "vars names 'nope', which is no parameter"),
    ("vars with a misspelt one", '[compare]\nvars = ["sigma", "taux"]\n', "did you mean 'tau'?"),
    ("plot equal to the table", '[compare]\ntable = "t.md"\nplot = "t.md"\n', "table and plot are one file"),
    ("the table is a run's out", '[compare]\ntable = "a.nc"\n', "it is an input of this run"),
    ("the plot is a checkpoint", 'checkpoint = "c.npz"\n[compare]\nplot = "c.npz"\n', "it is an input of this run"),
    ("a reference that is no run's out", '[compare]\nreference = "b.nc"\n', "is not the out of any run"),
]


@pytest.mark.parametrize("text, culprit", [c[1:] for c in COMPARE], ids=[c[0] for c in COMPARE])
def test_a_comparison_is_checked_before_the_runs(work, capsys, text, culprit):
    refused(["run", run_file(work, BASE + 'out = "a.nc"\n' + text)], capsys, culprit)
    assert_nothing_written(work)


def test_known_compare_vars_pass_the_checks(work, capsys):
    no_internal_error(["run", run_file(work, BASE + 'out = "a.nc"\n[compare]\nvars = ["sigma", "tau"]\n'),
                       "--dry-run"], capsys, statuses=(0,))


def test_a_grid_of_a_million_runs_is_refused_at_once(work, capsys):
    values = ", ".join(str(n) for n in range(1, 101))
    text = f'out = "a_{{chains}}_{{draws}}_{{warmup}}.nc"\ngrid = {{ chains = [{values}], draws = [{values}], ' \
           f'warmup = [{values}] }}\n'
    refused(["run", run_file(work, BASE + text), "--dry-run"], capsys, "the grid expands into 1000000 runs")


def test_an_empty_list_of_runs_is_refused(work, capsys):
    refused(["run", run_file(work, BASE + 'run = []\n'), "--dry-run"], capsys, "'run' must be an array of tables "
            "([[run]]); it is empty")
