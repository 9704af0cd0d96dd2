"""Curated syntax errors: lark's ``UnexpectedInput`` turned into a message for the mistake made.

lark reports the token it did not expect and the tokens it did. :func:`curated` looks around the
error (unclosed brackets and braces, a missing ';', a declaration in the model block, a misspelt
block, type or bound, a '~' statement outside the model block, ...) and says what is most likely
wrong, with a span and a hint; otherwise it lists what was expected, in words.
"""

from __future__ import annotations

import re

import lark
from lark import Token

from gpdsl.errors import ModelSyntaxError
from gpdsl.source import Source, Span
from gpdsl.suggest import did_you_mean

BLOCK_NAMES = ("data", "parameters", "transformed parameters", "latent", "model")
_TOKEN_SPELLING = {
    "SEMICOLON": "';'", "LBRACE": "'{'", "RBRACE": "'}'", "LPAR": "'('", "RPAR": "')'",
    "LSQB": "'['", "RSQB": "']'", "COMMA": "','", "TILDE": "'~'", "EQUAL": "'='", "COLON": "':'",
    "PLUS": "'+'", "MINUS": "'-'", "STAR": "'*'", "SLASH": "'/'", "CIRCUMFLEX": "'^'",
    "LESSTHAN": "'<'", "MORETHAN": "'>'", "NAME": "a name", "NUMBER": "a number",
    "STRING": "a string", "BOUND_NAME": "'lower' or 'upper'", "$END": "end of file",
    "DATA": "'data'", "PARAMETERS": "'parameters'", "TRANSFORMED": "'transformed parameters'", "LATENT": "'latent'", "MODEL": "'model'",
    "ARRAY": "'array'", "INT": "'int'", "REAL": "'real'", "VECTOR": "'vector'",
    "MATRIX": "'matrix'", "FOR": "'for'", "IN": "'in'",
}
_TYPE_WORDS = ("int", "real", "vector", "matrix", "array")
_OPENERS = {"(": ")", "[": "]"}
_CLOSERS = {")": "(", "]": "["}
_BLOCK_TOKENS = {"DATA", "PARAMETERS", "TRANSFORMED", "LATENT", "MODEL"}
_TYPE_TOKENS = {"INT", "REAL", "VECTOR", "MATRIX", "ARRAY"}


_GROUPS = (
    # (tokens that must all be expected, tokens the group replaces, how to say it)
    ({"NAME", "NUMBER", "LPAR"}, {"NAME", "NUMBER", "STRING", "LPAR", "MINUS", "LSQB"}, "an expression"),
    ({"PLUS", "STAR", "SLASH"}, {"PLUS", "MINUS", "STAR", "SLASH", "CIRCUMFLEX"}, "an operator"),
    ({"INT", "REAL", "VECTOR"}, {"INT", "REAL", "VECTOR", "MATRIX", "ARRAY"}, "a type"),
    ({"DATA", "MODEL"}, {"DATA", "PARAMETERS", "TRANSFORMED", "LATENT", "MODEL"},
     "a block (data, parameters, transformed parameters, latent or model)"),
)


def _spell(expected) -> str:
    """A readable list of what the parser expected: tokens, with groups of them named."""
    expected = set(expected) - {"$END"} or set(expected)
    groups = []
    for needed, replaced, words in _GROUPS:
        if needed <= expected:
            expected -= replaced
            groups.append(words)
    names = sorted({_TOKEN_SPELLING.get(e, e) for e in expected}) + groups
    if len(names) > 7:
        names = names[:6] + ["..."]
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]


def _describe(token: Token) -> str:
    """``name 'x'``, ``number '1'``, ``end of file`` or the quoted token."""
    if token.type == "$END":
        return "end of file"
    if token.type in ("NAME", "NUMBER", "STRING"):
        text = _shortened(str(token))
        return f"{token.type.lower()} {text!r}" if token.type != "STRING" else f"string {text}"
    return f"'{_shortened(str(token))}'"


def _shortened(text: str, width: int = 40) -> str:
    """A token as messages quote it: a long one cut to ``width`` characters, the cut marked ``...``."""
    return text if len(text) <= width else f"{text[:width - 3]}..."


def _previous_token_end(source: Source, offset: int) -> Span:
    """A point just after the last non-blank, non-comment character before ``offset``."""
    i = len(_strip_comments(source.text[:offset], strings=False).rstrip())
    return Span.from_offsets(source, i, i)


def _strip_comments(text: str, strings: bool = True) -> str:
    """Replace comments (and, if ``strings``, string contents) by spaces, keeping offsets and newlines."""
    out = list(text)
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            start = i
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            start = i
        elif ch == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 1
            if not strings:
                i = j + 1 if j < n and text[j] == '"' else j
                continue
            start = i + 1
            i = j + 1 if j < n and text[j] == '"' else j
            for k in range(start, j):
                out[k] = " "
            continue
        else:
            i += 1
            continue
        for k in range(start, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def _unterminated_comment(source: Source, upto: int) -> int | None:
    """Offset of a '/*' before ``upto`` that has no '*/' (ignoring strings and line comments)."""
    text = source.text
    i = 0
    while i < min(upto + 1, len(text)):
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = len(text) if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                return i
            i = j + 2
        elif text[i] == '"':
            j = i + 1
            while j < len(text) and text[j] not in '"\n':
                j += 1
            i = j + 1
        else:
            i += 1
    return None


def _open_brace(source: Source, upto: int | None = None) -> Span | None:
    """The innermost '{' before ``upto`` (default: the end) that is not closed before it."""
    stack = []
    text = _strip_comments(source.text)
    for i, ch in enumerate(text[:upto]):
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            stack.pop()
    return Span.from_offsets(source, stack[-1], stack[-1] + 1) if stack else None


def _statement_start(text: str, offset: int) -> int:
    """Offset just after the last ';', '{' or '}' before ``offset`` (text already comment-stripped)."""
    return max(text.rfind(c, 0, offset) for c in ";{}") + 1


def _bracket_problem(source: Source, offset: int) -> ModelSyntaxError | None:
    """An unbalanced '(' or '[' in the statement around ``offset``, if that explains the error there."""
    text = _strip_comments(source.text)
    begin = _statement_start(text, offset)
    stack: list[int] = []
    for i in range(begin, min(offset + 1, len(text))):
        ch = text[i]
        if ch in _OPENERS:
            if i < offset:
                stack.append(i)
        elif ch in _CLOSERS:
            if not stack:
                return ModelSyntaxError(f"unbalanced brackets: this '{ch}' has no matching '{_CLOSERS[ch]}'",
                                        Span.from_offsets(source, i, i + 1), hint=f"remove it, or add the '{_CLOSERS[ch]}'")
            if text[stack[-1]] != _CLOSERS[ch]:
                opener = Span.from_offsets(source, stack[-1], stack[-1] + 1)
                return ModelSyntaxError(
                    f"unbalanced brackets: this '{ch}' does not match the '{text[stack[-1]]}' at line "
                    f"{opener.line}, column {opener.column}", Span.from_offsets(source, i, i + 1),
                    hint=f"close the '{text[stack[-1]]}' with '{_OPENERS[text[stack[-1]]]}'")
            if i < offset:
                stack.pop()
    if not stack:
        return None
    # a closer later in the same statement means the brackets balance: the problem is elsewhere
    depth = len(stack)
    for i in range(offset, len(text)):
        ch = text[i]
        if ch in ";{}":
            break
        if ch in _OPENERS:
            depth += 1
        elif ch in _CLOSERS:
            depth -= 1
            if depth < len(stack):
                return None
    opener = stack[-1]
    ch = text[opener]
    return ModelSyntaxError(f"unbalanced brackets: this '{ch}' is never closed",
                            Span.from_offsets(source, opener, opener + 1),
                            hint=f"add the missing '{_OPENERS[ch]}'")


def curated(error: lark.exceptions.UnexpectedInput, source: Source) -> ModelSyntaxError:
    """The error to report for a parse error.

    Parameters
    ----------
    error : lark.exceptions.UnexpectedInput
        What lark raised.
    source : Source
        The text parsed.

    Returns
    -------
    ModelSyntaxError
        A message for the likely mistake, with its span and, where one helps, a hint.
    """
    offset = getattr(error, "pos_in_stream", None)
    if isinstance(error, lark.exceptions.UnexpectedToken) and error.token.start_pos is not None:
        offset = error.token.start_pos
    if offset is None or isinstance(error, lark.exceptions.UnexpectedEOF) or (
            isinstance(error, lark.exceptions.UnexpectedToken) and error.token.type == "$END"):
        offset = len(source.text)
    comment = _unterminated_comment(source, offset)
    if comment is not None:
        return ModelSyntaxError("unterminated block comment", Span.from_offsets(source, comment, comment + 2),
                                hint="close it with '*/'")

    if offset >= len(source.text):
        bracket = _bracket_problem(source, len(source.text))
        if bracket is not None:
            return bracket
        opened = _open_brace(source)
        if opened is not None:
            return ModelSyntaxError(_unclosed_brace(source, opened), opened, hint="add the missing '}'")
        expected = getattr(error, "expected", None) or ()
        if "SEMICOLON" in expected:
            return _missing_semicolon(source, len(source.text))
        return ModelSyntaxError(f"unexpected end of file; expected {_spell(expected)}",
                                _previous_token_end(source, len(source.text)))

    if isinstance(error, lark.exceptions.UnexpectedCharacters):
        span = Span.from_offsets(source, offset, offset + 1)
        char = source.text[offset]
        if char == '"':
            return ModelSyntaxError("unterminated string", span, hint="close the string with '\"' on the same line")
        return ModelSyntaxError(f"unexpected character {char!r}", span)

    token: Token = error.token
    expected = set(error.expected or ())
    start = offset
    span = Span.from_offsets(source, start, start + max(1, len(str(token))))
    value = _shortened(str(token))
    block = _block_of(source, start)

    if token.type == "RBRACE" and "RBRACE" not in expected and _at_top(source, start):
        return ModelSyntaxError("unbalanced braces: this '}' closes no block", span,
                                hint="remove it, or check the '{' before it")
    if token.type in _BLOCK_TOKENS and not _at_top(source, start):
        opened = _open_brace(source, start)
        return ModelSyntaxError(_unclosed_brace(source, opened), opened,
                                hint=f"add the missing '}}' before '{value}' on line {span.line}")
    if token.type in {"RPAR", "RSQB"} or expected & {"RPAR", "RSQB"}:
        bracket = _bracket_problem(source, start)
        if bracket is not None:
            return bracket
    if "SEMICOLON" in expected and (_on_later_line(source, start) or token.type in _TYPE_TOKENS | {"RBRACE"}):
        return _missing_semicolon(source, start)
    declaration = _declaration_start(source, start) if block == "model" and token.type != "RBRACE" else None
    if declaration is not None:
        return ModelSyntaxError("declarations are not allowed in the model block", declaration,
                                hint="declare data, parameters and latent variables in their own blocks; "
                                     "the model block holds only '~' statements and loops")
    if token.type == "NAME" and expected & _BLOCK_TOKENS and not expected - _BLOCK_TOKENS - {"$END"}:
        hint = did_you_mean(value, BLOCK_NAMES) or "blocks are: " + ", ".join(BLOCK_NAMES)
        return ModelSyntaxError(f"unknown block '{value}'", span, hint=hint)
    if token.type == "NAME" and expected & _TYPE_TOKENS and "NAME" not in expected:
        after = _next_char(source, start + len(value))
        if after in ("~", "="):
            return ModelSyntaxError(f"a '~' statement cannot appear in the {block or 'data'} block", span,
                                    hint="'~' statements go in the model block; this block only declares "
                                         "variables, e.g. 'vector[N] y;'")
        if after == ";":
            return ModelSyntaxError(f"the declaration of '{value}' has no type", span,
                                    hint=f"give it one, e.g. 'real {value};' or 'vector[N] {value};'")
        hint = did_you_mean(value, _TYPE_WORDS) or "types are: int, real, vector[n], matrix[r, c], array[n] T"
        return ModelSyntaxError(f"unknown type '{value}' in a declaration", span, hint=hint)
    if token.type == "NAME" and expected == {"BOUND_NAME"}:
        return ModelSyntaxError(f"unknown bound '{value}'", span,
                                hint=did_you_mean(value, ("lower", "upper")) or "bounds are 'lower' and 'upper'")
    if token.type == "EQUAL" and "TILDE" in expected:
        return ModelSyntaxError("'=' cannot assign here; model statements use '~'", span,
                                hint="write 'y ~ normal(f, s);' to state a distribution")
    if token.type == "TILDE" and "SEMICOLON" in expected and block == "data":
        return ModelSyntaxError("a prior after a data declaration is not allowed", span,
                                hint="priors go beside parameters (in the parameters block)")
    if token.type == "SEMICOLON" and _previous_char(source, start) == ";":
        return ModelSyntaxError("extra ';'", span, hint="remove it")
    previous = _previous_char(source, start)
    if previous == "~" and "NAME" in expected:
        return ModelSyntaxError(f"unexpected {_describe(token)} after '~'; expected a distribution", span,
                                hint="write e.g. 'y ~ normal(mu, sigma);'")
    if _on_later_line(source, start) and previous not in ";{}" and token.type not in expected:
        return ModelSyntaxError(f"incomplete statement: expected {_spell(expected)} after "
                                f"'{_previous_token(source, start)}'",
                                _previous_token_end(source, start),
                                hint=f"the next line starts with {_describe(token)}")
    if token.type in {"NAME", "NUMBER", "STRING"} and {"COMMA", "RPAR"} <= expected:
        return ModelSyntaxError(f"unexpected {_describe(token)} in an argument list; expected ',' or ')'", span,
                                hint="separate arguments with ','")
    if expected <= {"LBRACE", "RBRACE", "NAME", "FOR"} and "NAME" in expected and block == "model":
        return ModelSyntaxError(f"unexpected {_describe(token)}; expected a statement or '}}'", span,
                                hint="model statements are 'y ~ distribution(...);' and 'for (i in 1:N) ...'")
    if expected & _BLOCK_TOKENS and expected <= _BLOCK_TOKENS | {"$END"}:
        return ModelSyntaxError(f"unexpected {_describe(token)}; expected a block (data, parameters, latent "
                                "or model)", span, hint="a block starts with its name, e.g. 'parameters { ... }'")
    if expected & _TYPE_TOKENS and expected <= _TYPE_TOKENS | {"RBRACE"}:
        return ModelSyntaxError(f"unexpected {_describe(token)}; expected a declaration or '}}'", span,
                                hint="declarations are e.g. 'int N;', 'vector[N] y;', 'real<lower=0> s;'")
    return ModelSyntaxError(f"unexpected {_describe(token)}; expected {_spell(expected)}", span)


def _missing_semicolon(source: Source, offset: int) -> ModelSyntaxError:
    return ModelSyntaxError("missing ';' at the end of the statement", _previous_token_end(source, offset),
                            hint="every declaration and statement ends with ';'")


def _on_later_line(source: Source, offset: int) -> bool:
    before = _previous_token_end(source, offset)
    return source.position(offset)[0] > before.line


def _previous_char(source: Source, offset: int) -> str:
    """The last non-blank character before ``offset`` outside comments ('' at the start)."""
    text = _strip_comments(source.text[:offset], strings=False).rstrip()
    return text[-1] if text else ""


def _previous_token(source: Source, offset: int) -> str:
    """The last token before ``offset`` (a word, a number or one character), '' at the start."""
    text = _strip_comments(source.text[:offset], strings=False).rstrip()
    word = re.search(r"[A-Za-z0-9_.]+$", text)
    return word.group(0) if word else text[-1:]


def _next_char(source: Source, offset: int) -> str:
    """The first non-blank character at or after ``offset`` outside comments, skipping '[...]'."""
    text = _strip_comments(source.text)
    i = offset
    depth = 0
    while i < len(text):
        ch = text[i]
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth <= 0 and not ch.isspace():
            return ch
        i += 1
    return ""


def _at_top(source: Source, offset: int) -> bool:
    depth = 0
    for ch in _strip_comments(source.text[:offset]):
        depth += {"{": 1, "}": -1}.get(ch, 0)
    return depth <= 0


_BLOCK_HEAD = re.compile(r"\b(data|parameters|latent|model)\s*\{")


def _block_of(source: Source, offset: int) -> str | None:
    """The kind of the last block opened before ``offset``."""
    heads = list(_BLOCK_HEAD.finditer(_strip_comments(source.text[:offset])))
    return heads[-1].group(1) if heads else None


def _declaration_start(source: Source, offset: int) -> Span | None:
    """The type word opening the statement around ``offset``, if it looks like a declaration."""
    text = _strip_comments(source.text)
    begin = _statement_start(text, offset)
    match = re.match(r"\s*(int|real|vector|matrix|array)\b\s*[\[<A-Za-z_]", text[begin:offset + 1])
    if match is None:
        return None
    return Span.from_offsets(source, begin + match.start(1), begin + match.end(1))


def _unclosed_brace(source: Source, opened: Span) -> str:
    """'the data block's '{' is never closed', or a plain 'this '{' ...' for a statement block."""
    text = _strip_comments(source.text)
    line_start = text.rfind("\n", 0, _offset(source, opened)) + 1
    head = re.search(r"\b(data|parameters|latent|model)\s*$", text[line_start:_offset(source, opened)])
    what = f"the '{{' of the {head.group(1)} block" if head else "this '{'"
    return f"unbalanced braces: {what} is never closed"


def _offset(source: Source, span: Span) -> int:
    lines = source.text.split("\n")
    return sum(len(l) + 1 for l in lines[: span.line - 1]) + span.column - 1
