"""Parsing: source text to AST, with curated messages for the common mistakes."""

from __future__ import annotations

import difflib
import functools
import importlib.resources

import lark
from lark import Token, Transformer, v_args

from gpdsl.errors import ModelSyntaxError
from gpdsl.source import Source, Span
from gpdsl.syntax import ast

BLOCK_NAMES = ("data", "parameters", "latent", "model")
_TOKEN_SPELLING = {
    "SEMICOLON": "';'", "LBRACE": "'{'", "RBRACE": "'}'", "LPAR": "'('", "RPAR": "')'",
    "LSQB": "'['", "RSQB": "']'", "COMMA": "','", "TILDE": "'~'", "EQUAL": "'='", "COLON": "':'",
    "PLUS": "'+'", "MINUS": "'-'", "STAR": "'*'", "SLASH": "'/'", "CIRCUMFLEX": "'^'",
    "LESSTHAN": "'<'", "MORETHAN": "'>'", "NAME": "a name", "NUMBER": "a number",
    "STRING": "a string", "BOUND_NAME": "'lower' or 'upper'", "$END": "end of file",
    "DATA": "'data'", "PARAMETERS": "'parameters'", "LATENT": "'latent'", "MODEL": "'model'",
    "ARRAY": "'array'", "INT": "'int'", "REAL": "'real'", "VECTOR": "'vector'",
    "MATRIX": "'matrix'", "FOR": "'for'", "IN": "'in'",
}
_TYPE_WORDS = ("int", "real", "vector", "matrix", "array")


@functools.lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    grammar = importlib.resources.files("gpdsl.grammar").joinpath("gpdsl.lark").read_text()
    return lark.Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=False)


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
    source = Source(text, name)
    try:
        tree = _parser().parse(text)
    except lark.exceptions.UnexpectedInput as error:
        raise _curated(error, source) from None
    return _ToAst(source).transform(tree)


def parse_file(path) -> ast.Program:
    """Parse a model file (see :func:`parse`)."""
    from pathlib import Path

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ModelSyntaxError(f"cannot read model file {path}: {error.strerror}") from None
    return parse(text, str(path))


# ---- error curation ----------------------------------------------------------------------------
def _spell(expected) -> str:
    names = sorted({_TOKEN_SPELLING.get(e, e) for e in expected})
    if len(names) > 6:
        names = names[:6] + ["..."]
    return ", ".join(names)


def _previous_token_end(source: Source, offset: int) -> Span:
    """A point just after the last non-blank, non-comment character before ``offset``."""
    text = source.text[:offset]
    i = len(text)
    while True:
        stripped = text[:i].rstrip()
        line_start = stripped.rfind("\n") + 1
        line = stripped[line_start:]
        cut = line.find("//")
        if cut >= 0:
            i = line_start + cut
            continue
        i = len(stripped)
        break
    return Span.from_offsets(source, i, i)


def _open_brace(source: Source) -> Span | None:
    """The position of the first '{' that is never closed (ignoring comments)."""
    stack = []
    text = _strip_comments(source.text)
    for i, ch in enumerate(text):
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            stack.pop()
    return Span.from_offsets(source, stack[-1], stack[-1] + 1) if stack else None


def _strip_comments(text: str) -> str:
    """Replace comments by spaces, keeping offsets."""
    out = list(text)
    i = 0
    while i < len(text):
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = len(text) if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = len(text) if j < 0 else j + 2
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def _curated(error: lark.exceptions.UnexpectedInput, source: Source) -> ModelSyntaxError:
    if isinstance(error, lark.exceptions.UnexpectedEOF) or (
        isinstance(error, lark.exceptions.UnexpectedToken) and error.token.type == "$END"
    ):
        end = Span.from_offsets(source, len(source.text), len(source.text))
        opened = _open_brace(source)
        if opened is not None:
            return ModelSyntaxError(
                f"unbalanced braces: the '{{' at line {opened.line}, column {opened.column} "
                "is never closed", opened, hint="add the missing '}'")
        expected = getattr(error, "expected", None) or ()
        return ModelSyntaxError(f"unexpected end of file; expected {_spell(expected)}",
                                _previous_token_end(source, len(source.text)))

    if isinstance(error, lark.exceptions.UnexpectedCharacters):
        offset = error.pos_in_stream
        span = Span.from_offsets(source, offset, offset + 1)
        char = source.text[offset]
        if char == '"':
            return ModelSyntaxError("unterminated string", span, hint="close the string with '\"' on the same line")
        if char == "/" and source.text.startswith("/*", offset):
            return ModelSyntaxError("unterminated block comment", Span.from_offsets(source, offset, offset + 2),
                                    hint="close it with '*/'")
        allowed = getattr(error, "allowed", None) or set()
        if "SEMICOLON" in allowed and char in "\n":
            return _missing_semicolon(source, offset)
        return ModelSyntaxError(f"unexpected character {char!r}", span)

    token: Token = error.token
    expected = set(error.expected or ())
    start = token.start_pos if token.start_pos is not None else 0
    span = Span.from_offsets(source, start, start + max(1, len(str(token))))
    value = str(token)

    if token.type == "RBRACE" and "RBRACE" not in expected and error.state is not None and _at_top(source, start):
        return ModelSyntaxError("unbalanced braces: this '}' closes no block", span,
                                hint="remove it, or check the '{' before it")
    if "SEMICOLON" in expected and _on_later_line(source, start):
        return _missing_semicolon(source, start)
    if token.type == "NAME" and expected & {"DATA", "PARAMETERS", "LATENT", "MODEL"} and not expected - {
            "DATA", "PARAMETERS", "LATENT", "MODEL", "$END"}:
        guess = difflib.get_close_matches(value, BLOCK_NAMES, n=1)
        hint = f"did you mean '{guess[0]}'?" if guess else "blocks are: " + ", ".join(BLOCK_NAMES)
        return ModelSyntaxError(f"unknown block '{value}'", span, hint=hint)
    if token.type == "NAME" and expected & {"INT", "REAL", "VECTOR", "MATRIX", "ARRAY"} and "NAME" not in expected:
        guess = difflib.get_close_matches(value, _TYPE_WORDS, n=1)
        hint = f"did you mean '{guess[0]}'?" if guess else "types are: int, real, vector[n], matrix[r, c], array[n] T"
        return ModelSyntaxError(f"unknown type '{value}' in a declaration", span, hint=hint)
    if token.type == "EQUAL" and "TILDE" in expected:
        return ModelSyntaxError("'=' cannot assign here; model statements use '~'", span,
                                hint="write 'y ~ normal(f, s);' to state a distribution")
    if token.type == "TILDE" and "SEMICOLON" in expected:
        return ModelSyntaxError("a prior after a data declaration is not allowed", span,
                                hint="priors go beside parameters (in the parameters block)") \
            if _block_of(source, start) == "data" else ModelSyntaxError(
                f"unexpected '~'; expected {_spell(expected)}", span)
    if token.type in {"RPAR", "RSQB"}:
        return ModelSyntaxError(f"unbalanced brackets: unexpected {_TOKEN_SPELLING[token.type]}", span,
                                hint=f"expected {_spell(expected)}")
    if token.type == "NAME" and value in ("lower", "upper"):
        pass
    what = f"'{value}'" if token.type not in {"NAME", "NUMBER"} else f"{_TOKEN_SPELLING[token.type]} '{value}'"
    return ModelSyntaxError(f"unexpected {what}; expected {_spell(expected)}", span)


def _missing_semicolon(source: Source, offset: int) -> ModelSyntaxError:
    return ModelSyntaxError("missing ';' at the end of the statement", _previous_token_end(source, offset),
                            hint="every declaration and statement ends with ';'")


def _on_later_line(source: Source, offset: int) -> bool:
    before = _previous_token_end(source, offset)
    return source.position(offset)[0] > before.line


def _at_top(source: Source, offset: int) -> bool:
    depth = 0
    for ch in _strip_comments(source.text[:offset]):
        depth += {"{": 1, "}": -1}.get(ch, 0)
    return depth <= 0


def _block_of(source: Source, offset: int) -> str | None:
    text = _strip_comments(source.text[:offset])
    best, best_pos = None, -1
    for name in BLOCK_NAMES:
        pos = text.rfind(name)
        if pos > best_pos:
            best, best_pos = name, pos
    return best


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

    def latent_block(self, meta, _kw, *items):
        return self._block(meta, "latent", items)

    def model_block(self, meta, _kw, *items):
        return self._block(meta, "model", items)

    # declarations
    def declaration(self, meta, type_spec, name, prior=None):
        return ast.Declaration(self._s(meta), type_spec, str(name), prior, _span(self.source, name))

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
