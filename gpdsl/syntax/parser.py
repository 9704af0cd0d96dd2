"""Parsing: source text to AST; the messages for common mistakes are :mod:`gpdsl.syntax.messages`."""

from __future__ import annotations

import functools
import os

import lark
from lark import Token, Transformer, v_args

from gpdsl.errors import GpdslError, ModelSyntaxError
from gpdsl.source import Source, Span
from gpdsl.syntax import ast
from gpdsl.syntax.messages import BLOCK_NAMES, curated

__all__ = ["BLOCK_NAMES", "MAX_MODEL_BYTES", "MAX_NESTING", "lark_parser", "parse", "parse_file"]

MAX_MODEL_BYTES = 2**20
"""The largest model file or text accepted (1 MB): models are a page long; more is a wrong file."""


@functools.lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    import gpdsl.grammar

    with open(os.path.join(os.path.dirname(gpdsl.grammar.__file__), "gpdsl.lark")) as handle:
        grammar = handle.read()
    return lark.Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=False, cache=True)


def lark_parser() -> lark.Lark:
    """The grammar's LALR parser, built on the first call of the process (and then kept), as :func:`parse` uses it.

    Public so that a benchmark can time the grammar's construction apart from parsing
    (``benchmarks/check_speed.py``).

    Returns
    -------
    lark.Lark
    """
    return _parser()


def parse(text: str, name: str = "<string>") -> ast.Program:
    """Parse model text into an :class:`~gpdsl.syntax.ast.Program`.

    Parameters
    ----------
    text : str
        The model source.
    name : str
        File name used in error messages.

    Raises
    ------
    ModelSyntaxError
        With a ``file:line:col`` location, the source line and a caret.
    """
    if len(text) > MAX_MODEL_BYTES:
        raise ModelSyntaxError(f"model {name} is {len(text)} characters long; models are at most 1 MB "
                               f"({MAX_MODEL_BYTES} characters)", hint="is it the model file?")
    source = Source(text, name)
    try:
        tree = _parser().parse(text)
    except lark.exceptions.UnexpectedInput as error:
        raise curated(error, source) from None
    _check_depth(tree, source)
    try:
        return _ToAst(source).transform(tree)
    except lark.exceptions.VisitError as error:
        # errors raised in the transformer's callbacks (keyword given twice, ...) arrive wrapped
        if isinstance(error.orig_exc, GpdslError):
            raise error.orig_exc from None
        raise


def parse_file(path) -> ast.Program:
    """Parse a model file (see :func:`parse`)."""
    from pathlib import Path

    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_MODEL_BYTES:
            raise ModelSyntaxError(f"model file {path} is {size} bytes; models are at most 1 MB ({MAX_MODEL_BYTES} "
                                   "bytes)", hint="is it the model file?")
        text = path.read_text()
    except OSError as error:
        raise ModelSyntaxError(f"cannot read model file {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ModelSyntaxError(f"cannot read model file {path}: not UTF-8 text ({error.reason})") from None
    return parse(text, str(path))


MAX_NESTING = 100
"""Deepest syntax tree accepted; deeper expressions would exhaust Python's recursion limit."""


_EXPRESSION_RULES = {"neg", "add", "sub", "mul", "div", "pow", "index", "tuple", "vector_literal"}


def _check_depth(tree: lark.Tree, source: Source) -> None:
    stack = [(tree, 1, None)]
    while stack:
        node, depth, outermost = stack.pop()
        if outermost is None and node.data in _EXPRESSION_RULES:
            outermost = node
        if depth > MAX_NESTING:
            meta = (outermost or node).meta
            span = (Span.point(source, meta.line, meta.column) if not getattr(meta, "empty", True)
                    else Span.point(source, 1, 1))
            raise ModelSyntaxError(f"expression nested too deeply (more than {MAX_NESTING} levels)", span,
                                   hint="split it up or simplify it")
        stack.extend((child, depth + 1, outermost) for child in node.children if isinstance(child, lark.Tree))


# ---- tree to AST -------------------------------------------------------------------------------
def _span(source: Source, meta_or_token) -> Span:
    if isinstance(meta_or_token, Token):
        return Span(source, meta_or_token.line, meta_or_token.column,
                    meta_or_token.end_line, meta_or_token.end_column)
    meta = meta_or_token
    if getattr(meta, "empty", False):
        return Span.point(source, 1, 1)
    return Span(source, meta.line, meta.column, meta.end_line, meta.end_column)


@v_args(meta=True, inline=True)
class _ToAst(Transformer):
    def __init__(self, source: Source):
        super().__init__()
        self.source = source

    def _s(self, meta):
        return _span(self.source, meta)

    # blocks
    def start(self, meta, *blocks):
        return ast.Program(self._s(meta), self.source, tuple(blocks))

    def _block(self, meta, kind, items):
        decls = tuple(i for i in items if isinstance(i, ast.Declaration))
        stmts = tuple(i for i in items if isinstance(i, ast.Statement))
        return ast.Block(self._s(meta), kind, decls, stmts)

    def data_block(self, meta, _kw, *items):
        return self._block(meta, "data", items)

    def parameters_block(self, meta, _kw, *items):
        return self._block(meta, "parameters", items)

    def transformed_parameters_block(self, meta, _kw, _kw2, *items):
        return self._block(meta, "transformed parameters", items)

    def latent_block(self, meta, _kw, *items):
        return self._block(meta, "latent", items)

    def model_block(self, meta, _kw, *items):
        return self._block(meta, "model", items)

    # declarations
    def declaration(self, meta, type_spec, name, prior=None):
        return ast.Declaration(self._s(meta), type_spec, str(name), prior, _span(self.source, name))

    def definition(self, meta, type_spec, name, value):
        return ast.Declaration(self._s(meta), type_spec, str(name), None, _span(self.source, name), value)

    def prior(self, meta, call):
        return call

    def type(self, meta, element):
        return element

    def array_type(self, meta, _kw, dims, element):
        return ast.TypeSpec(self._s(meta), element.base, element.dims, tuple(dims), element.lower, element.upper)

    def _element(self, meta, base, rest):
        lower = upper = None
        dims = []
        for item in rest:
            if isinstance(item, tuple) and item and item[0] == "constraint":
                lower, upper = item[1], item[2]
            else:
                dims.append(item)
        return ast.TypeSpec(self._s(meta), base, tuple(dims), (), lower, upper)

    def int_type(self, meta, _kw, *rest):
        return self._element(meta, "int", rest)

    def real_type(self, meta, _kw, *rest):
        return self._element(meta, "real", rest)

    def vector_type(self, meta, _kw, *rest):
        return self._element(meta, "vector", rest)

    def matrix_type(self, meta, _kw, *rest):
        return self._element(meta, "matrix", rest)

    def cholesky_factor_corr_type(self, meta, _kw, size):
        return self._element(meta, "cholesky_factor_corr", (size,))

    def simplex_type(self, meta, _kw, size):
        return self._element(meta, "simplex", (size,))

    def constraint(self, meta, *bounds):
        found = {}
        for name, value, span in bounds:
            if name in found:
                raise ModelSyntaxError(f"'{name}' bound given twice", span)
            found[name] = value
        return ("constraint", found.get("lower"), found.get("upper"))

    def bound(self, meta, name, value):
        return (str(name), value, _span(self.source, name))

    # statements
    def tilde_statement(self, meta, target, call):
        return ast.Tilde(self._s(meta), target, call)

    def target(self, meta, name, *index_lists):
        indices = tuple(i for lst in index_lists for i in lst)
        return ast.Target(self._s(meta), str(name), indices)

    def for_statement(self, meta, _for, name, _in, start, stop, body):
        body = body if isinstance(body, tuple) else (body,)
        return ast.For(self._s(meta), str(name), start, stop, body)

    def statement_block(self, meta, *statements):
        return tuple(statements)

    # expressions
    def number(self, meta, token):
        text = str(token)
        is_int = text.isdigit()
        return ast.Number(self._s(meta), float(text), is_int)

    def string(self, meta, token):
        return ast.String(self._s(meta), str(token)[1:-1])

    def name(self, meta, token):
        return ast.Name(self._s(meta), str(token))

    def _binary(op):
        def method(self, meta, left, right):
            return ast.BinaryOp(self._s(meta), op, left, right)
        return method

    add, sub, mul, div, pow = _binary("+"), _binary("-"), _binary("*"), _binary("/"), _binary("^")

    def neg(self, meta, operand):
        return ast.Negate(self._s(meta), operand)

    def index(self, meta, base, indices):
        return ast.Index(self._s(meta), base, tuple(indices))

    def slice(self, meta, start, stop):
        return ast.Slice(self._s(meta), start, stop)

    def full_slice(self, meta):
        return ast.Slice(self._s(meta), None, None)

    def tuple(self, meta, first, rest):
        return ast.Tuple(self._s(meta), (first, *rest))

    def vector_literal(self, meta, items):
        return ast.VectorLiteral(self._s(meta), tuple(items))

    def call(self, meta, name, arguments=()):
        args = tuple(a for a in arguments if not isinstance(a, ast.KeywordArgument))
        kwargs = tuple(a for a in arguments if isinstance(a, ast.KeywordArgument))
        seen = set()
        for kw in kwargs:
            if kw.name in seen:
                raise ModelSyntaxError(f"keyword argument '{kw.name}' given twice", kw.name_span)
            seen.add(kw.name)
        return ast.Call(self._s(meta), str(name), args, kwargs, _span(self.source, name))

    def arguments(self, meta, *items):
        for before, after in zip(items, items[1:]):
            if isinstance(before, ast.KeywordArgument) and not isinstance(after, ast.KeywordArgument):
                raise ModelSyntaxError("positional argument after a keyword argument", after.span)
        return items

    def keyword_argument(self, meta, name, value):
        return ast.KeywordArgument(self._s(meta), str(name), value, _span(self.source, name))

    def expr_list(self, meta, *items):
        return list(items)

    def index_list(self, meta, *items):
        return list(items)
