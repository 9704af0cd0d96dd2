"""What a run must satisfy before it starts, beyond its data's declarations and its settings' ranges.

:mod:`gpdsl.data.validation` checks data against the declarations and each settings class checks its own
values; :func:`verify_runnable` checks what needs both, so that a mistake is refused before the first
iteration and not hours into a run: every size is at least 1, the observed outputs carry a signal at a
scale double precision can square, initial values fit their parameters' declarations, and the largest
arrays the run allocates fit in the memory available.
"""

from __future__ import annotations

import math

import numpy as np

from gpdsl.data.memory import available_memory, shown_bytes
from gpdsl.errors import DataError, MethodError
from gpdsl.ir.nodes import Model, Ref
from gpdsl.ir.periodic_series import checked_series_period, sum_terms
from gpdsl.numerics.hsgp import hsgp_box
from gpdsl.settings.fields import PlannedRun, RunPlan

SMALLEST_SCALE = 1e-100
LARGEST_SCALE = 1e100
"""Outputs whose spread lies outside these bounds are refused: their squares under- or overflow."""


def verify_runnable(model: Model, data: dict, settings) -> None:
    """Refuse a run that could not give a meaningful result, naming the variable or setting.

    Parameters
    ----------
    model : Model
    data : dict
        Validated data (:func:`gpdsl.data.validation.validate_data`).
    settings : dataclass
        The method's validated settings; their :meth:`~gpdsl.settings.fields.PlannedRun.run_plan` says what the run
        allocates and where it starts (a settings class without one is taken to form full kernel matrices).

    Raises
    ------
    DataError
        A size is 0, an output is entirely missing, constant or of a scale double precision cannot square.
    MethodError
        An initial value does not fit its parameter, there are more inducing inputs than points, or an
        array the run allocates exceeds the memory available.
    """
    plan = settings.run_plan() if isinstance(settings, PlannedRun) else RunPlan()
    verify_sizes(model, data)
    verify_hsgp_inputs(model, data)
    verify_outputs(model, data)
    verify_initial_values(model, data, plan.initial_values)
    verify_inducing(model, data, plan.inducing)
    verify_memory(model, data, plan)


def verify_hsgp_inputs(model: Model, data: dict) -> None:
    """Refuse inputs of a Hilbert-space approximate GP with a column of one value: its box, ``c`` times their half
    range, is empty (inputs that are data variables; the Stan program rejects the others at its start), and a
    periodic term's period given as data that is not a positive number."""
    for statement in model.gp_statements():
        if not statement.approximated_by("hsgp"):
            continue
        for term in sum_terms(statement.kernel):
            checked_series_period(statement, term, data)
        for component in statement.inputs.components:
            if isinstance(component, Ref) and component.name in data:
                value = np.asarray(data[component.name], dtype=float)
                hsgp_box(value.reshape(value.shape[0], -1), 1.5,
                         f"data '{component.name}' (the inputs of the hsgp '{statement.target.name}')")


def verify_sizes(model: Model, data: dict) -> None:
    """Refuse a size (``int`` data used as a dimension) of 0: a run needs at least one of everything."""
    for name in model.sizes:
        if data.get(name) == 0:
            users = [v.name for v in (*model.data.values(), *model.parameters.values(), *model.latents.values())
                     if name in v.type.shape]
            raise DataError(f"size '{name}' is 0: a run needs {name} >= 1"
                            + (f" ({', '.join(users)} would be empty)" if users else ""))


def verify_outputs(model: Model, data: dict) -> None:
    """Refuse real observed outputs that are entirely missing, constant, or of an unusable scale."""
    for statement in model.likelihoods():
        name = statement.target.name
        declared = model.data.get(name)
        if declared is None or declared.type.base != "real" or not isinstance(data.get(name), np.ndarray):
            continue
        values = data[name]
        observed = values[~np.isnan(values)]
        if observed.size == 0:
            raise DataError(f"data '{name}' holds no observed value: every entry is NaN (missing)")
        if values.ndim == 2:
            empty = np.flatnonzero(np.isnan(values).all(axis=0))
            if empty.size:
                raise DataError(f"column {empty[0] + 1} of data '{name}' is entirely missing (NaN): it carries no "
                                f"information", hint=f"drop the column (and lower the size of {name}'s columns)")
        if observed.size < 2:
            continue
        spread = float(np.max(np.abs(observed - observed.mean())))
        if spread == 0:
            raise DataError(f"data '{name}' is constant (every observed value is {observed[0]:.6g}): a GP has "
                            "no variation to fit")
        if not SMALLEST_SCALE <= spread <= LARGEST_SCALE or float(np.max(np.abs(observed))) > LARGEST_SCALE:
            raise DataError(f"data '{name}' varies on a scale of {spread:.3g}: double precision cannot square "
                            f"values outside [{SMALLEST_SCALE:g}, {LARGEST_SCALE:g}]",
                            hint=f"rescale {name} (divide it by its standard deviation)")


def verify_initial_values(model: Model, data: dict, initial_values: dict) -> None:
    """Refuse an initial value (``--init-value``) for no parameter, of the wrong size, or outside its bounds."""
    from gpdsl.suggest import did_you_mean

    for name, value in initial_values.items():
        parameter = model.parameters.get(name)
        if parameter is None:
            hint = did_you_mean(name, list(model.parameters))
            raise MethodError(f"--init-value {name}: '{name}' is not a parameter of the model (its parameters: "
                              f"{', '.join(model.parameters) or 'none'})", hint=hint)
        try:
            values = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            raise MethodError(f"--init-value {name}: {value!r} is not a number or a list of numbers") from None
        shape = parameter.type.concrete_shape(data)
        if values.ndim > len(shape) or (values.size != 1 and values.shape != shape):
            raise MethodError(f"--init-value {name}: {values.size} values given; {name} is declared "
                              f"{parameter.type.describe()} = {int(np.prod(shape))} values (or give one for all)")
        if not np.isfinite(values).all():
            raise MethodError(f"--init-value {name}: {_shown(values)} is not finite")
        for side, bound, outside in (("lower", parameter.type.lower, np.less_equal),
                                     ("upper", parameter.type.upper, np.greater_equal)):
            if isinstance(bound, (int, float)) and outside(values, bound).any():
                inside = f"> {bound:g}" if side == "lower" else f"< {bound:g}"
                raise MethodError(f"--init-value {name}: {_shown(values)} is outside its {side} bound: {name} is "
                                  f"declared {parameter.type.describe()}, so initial values must be {inside}")


def verify_inducing(model: Model, data: dict, num_inducing: int | None) -> None:
    """Refuse more inducing inputs (``--num-inducing``) than the points they summarise."""
    from gpdsl.ir.structure import process_nodes

    points = [int(d) if isinstance(d, int) else int(data[d])
              for d in (node.statement.inputs.index_shape[-1] for node in process_nodes(model))]
    if isinstance(num_inducing, int) and points and num_inducing > min(points):
        raise MethodError(f"--num-inducing {num_inducing} exceeds the {min(points)} points of the data: inducing "
                          f"inputs must be from 1 to {min(points)}")


def verify_memory(model: Model, data: dict, plan: RunPlan) -> None:
    """Refuse a run whose largest array, named, would not fit in the memory available."""
    available = available_memory()
    if available is None:
        return
    for what, count in _allocations(model, data, plan):
        needed = 8 * count
        if needed > available:
            raise MethodError(f"{what} would take {shown_bytes(needed)}; {shown_bytes(available)} of memory is available",
                              hint="check the sizes in the data and the settings")


def _allocations(model: Model, data: dict, plan: RunPlan):
    """``(what, number of float64 values)`` of the arrays a run allocates whose size the user chose."""
    variables = {**model.parameters, **model.latents}
    sizes = {name: _shape(variable, data) for name, variable in variables.items()}
    for name, variable in variables.items():
        yield f"{variable.role} {name} ({_declared(variable, data)})", math.prod(sizes[name])
    chains, draws = plan.chains, plan.draws
    recorded = sum(math.prod(sizes[name]) for name in model.parameters)
    if chains is not None and draws is not None:
        yield (f"the draws (--chains {chains} x --draws {draws} x {recorded} parameter values)",
               chains * draws * recorded)
    from gpdsl.ir.structure import process_nodes

    inducing, importance = plan.inducing, plan.importance
    copies = chains if chains is not None else 1
    per_chain = f"--chains {copies} x " if chains is not None else ""
    for node in process_nodes(model):
        points = sizes[node.name][0] if sizes.get(node.name) else 0
        values = math.prod(sizes[node.name])
        approximated = getattr(node.statement, "approximation", None) is not None
        markov = approximated and node.statement.approximated_by("state_space")  # O(N) by the Kalman filter
        basis = approximated and node.statement.approximated_by("hsgp")  # N x M basis, no N x N matrix
        if plan.full_kernel and basis:
            functions = _hsgp_basis_functions(node.statement)
            yield (f"the basis of {node.name} ({per_chain}{points} x about {functions} basis functions)",
                   copies * points * functions)
        elif plan.full_kernel and not markov:
            yield f"the kernel matrices of {node.name} ({per_chain}{points} x {points})", copies * points * points
        elif inducing is not None:
            yield f"the cross-covariance of {node.name} ({points} x --num-inducing {inducing})", points * inducing
        if importance is not None:
            yield (f"the importance draws of {node.name} ({per_chain}--num-importance {importance} x {values} values)",
                   copies * importance * values)
    units = {"values": 1, "parameters": recorded,
             "latent inputs": sum(math.prod(sizes[name]) for name, v in model.latents.items() if v.declared)}
    units["latent inputs squared"] = units["latent inputs"] ** 2
    for what, count, unit in plan.repeats:
        yield f"{what} ({per_chain}{count} x {units[unit]} values)", copies * count * units[unit]
    nodes = plan.quadrature_nodes
    if nodes is not None:
        for name, variable in model.latents.items():
            if variable.declared and len(sizes[name]) == 2:
                points, latent_dims = sizes[name]
                count = points * nodes ** latent_dims if latent_dims * math.log2(max(nodes, 2)) < 100 else 2**100
                yield (f"the kernel at the Gauss-Hermite points of {name} (--gh-nodes {nodes} ^ {latent_dims} latent "
                       f"dimensions x {points} points x {inducing} inducing inputs)", count * (inducing or 1))


def _hsgp_basis_functions(statement) -> int:
    """The product of an HSGP's ``m`` over its input columns (a periodic term's cosine series, ``2 m + 1``
    functions, is about as many): the columns of its ``N x M`` basis."""
    m = statement.approximation.value("m")
    per_column = m if isinstance(m, tuple) else (m,) * int(statement.inputs.dim)
    return math.prod(int(k) for k in per_column)


def _shape(variable, data) -> tuple[int, ...]:
    return tuple(int(d) for d in variable.type.concrete_shape(data))


def _declared(variable, data) -> str:
    symbols = [d for d in dict.fromkeys(variable.type.shape) if isinstance(d, str)]
    values = ", ".join(f"{s} = {data[s]}" for s in symbols)
    return f"{variable.type.describe()}" + (f" with {values}" if values else "")


def _shown(values: np.ndarray) -> str:
    return f"{values.item():g}" if values.size == 1 else "[" + ", ".join(f"{v:g}" for v in values.ravel()) + "]"
