"""The Unicode half of the threat scanner: characters that hide text from the person while the
model still reads it, and the folding that undoes look-alike spellings before the patterns
run ("ignоre" with a Cyrillic о, "ig\u00adnore" with a soft hyphen, fullwidth letters).

Free of Django imports, like the rest of the scanner.
"""

from __future__ import annotations

import re
import unicodedata

# Zero-width and bidi-control characters (Hermes' list of 17): their mere presence is a finding.
INVISIBLE_CHARS: tuple[str, ...] = (
    "\u200b",  # zero width space
    "\u200c",  # zero width non-joiner
    "\u200d",  # zero width joiner
    "\u2060",  # word joiner
    "\u2062",  # invisible times
    "\u2063",  # invisible separator
    "\u2064",  # invisible plus
    "\ufeff",  # zero width no-break space / BOM
    "\u202a",  # left-to-right embedding
    "\u202b",  # right-to-left embedding
    "\u202c",  # pop directional formatting
    "\u202d",  # left-to-right override
    "\u202e",  # right-to-left override
    "\u2066",  # left-to-right isolate
    "\u2067",  # right-to-left isolate
    "\u2068",  # first strong isolate
    "\u2069",  # pop directional isolate
)
INVISIBLE_RE = re.compile("[" + "".join(INVISIBLE_CHARS) + "]")

# Tag characters mirror ASCII one plane up (U+E0041 is a tagged "A"): invisible in every
# renderer, read as text by models ("ASCII smuggling").
TAG_FIRST, TAG_LAST = 0xE0000, 0xE007F
TAG_RE = re.compile(f"[{chr(TAG_FIRST)}-{chr(TAG_LAST)}]")
# The one legitimate use: the subdivision flags, a black flag followed by a short lowercase tag
# sequence and the cancel tag (England, Scotland, Wales).
_FLAG_TAGS_RE = re.compile("\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,6}\U000e007f")


def is_format(ch: str) -> bool:
    """A format character (category Cf: soft hyphen, word joiners, bidi marks, tags…)."""
    return unicodedata.category(ch) == "Cf"


def without_flags(text: str) -> str:
    """`text` with subdivision flag emoji removed, so their tags are not findings."""
    return _FLAG_TAGS_RE.sub("", text) if "\U0001f3f4" in text else text


def smuggled_ascii(text: str) -> str:
    """The ASCII text spelled by the tag characters in `text` (what the model reads)."""
    return "".join(
        chr(ord(ch) - TAG_FIRST)
        for ch in TAG_RE.findall(text)
        if 0x20 <= ord(ch) - TAG_FIRST < 0x7F
    )


# Letters of other scripts that render like Latin ones. Written from the Unicode confusables
# data (UTS #39) for the scripts an attacker reaches on a phone keyboard: Cyrillic, Greek,
# Armenian, Cherokee, and the Latin small capitals and IPA letters NFKC leaves alone.
_CONFUSABLE_GROUPS: dict[str, str] = {
    # Cyrillic
    "a": "\u0430\u04d1\u04d3",  # а ӑ ӓ
    "b": "\u0184\u042c",  # Ƅ Ь (hard-sign shape)
    "c": "\u0441\u03f2\u1d04\u217d",  # с ϲ ᴄ ⅽ
    "d": "\u0501\u217e",  # ԁ ⅾ
    "e": "\u0435\u0450\u0451\u04bd\u1d07",  # е ѐ ё ҽ ᴇ
    "g": "\u0261\u0581\u0262",  # ɡ ց ɢ
    "h": "\u04bb\u0570\u029c",  # һ հ ʜ
    "i": "\u0456\u0457\u03b9\u0131\u0269\u026a\u1fbe\u2170",  # і ї ι ı ɩ ɪ ι ⅰ
    "j": "\u0458\u03f3\u0237\u1d0a",  # ј ϳ ȷ ᴊ
    "k": "\u03ba\u1d0b\u043a",  # κ ᴋ к
    "l": "\u04cf\u217c\u029f\u0627",  # ӏ ⅼ ʟ ا
    "m": "\u1d0d\u217f",  # ᴍ ⅿ
    "n": "\u0578\u057c\u03b7\u0274",  # ո ռ η ɴ
    "o": "\u043e\u03bf\u0585\u03c3\u1d0f\u0ce6\u0d66\u0966",  # о ο օ σ ᴏ ೦ ൦ ०
    "p": "\u0440\u03c1\u1d18",  # р ρ ᴘ
    "q": "\u051b\u0566",  # ԛ զ
    "r": "\u0433\u1d26\u0280",  # г ᴦ ʀ
    "s": "\u0455\ua731\u01bd",  # ѕ ꜱ ƽ
    "t": "\u1d1b\u03c4",  # ᴛ τ
    "u": "\u057d\u03c5\u1d1c\u028b",  # ս υ ᴜ ʋ
    "v": "\u03bd\u0475\u1d20\u2174",  # ν ѵ ᴠ ⅴ
    "w": "\u051d\u0461\u1d21\u03c9",  # ԝ ѡ ᴡ ω
    "x": "\u0445\u03c7\u2179",  # х χ ⅹ
    "y": "\u0443\u04af\u03b3\u028f",  # у ү γ ʏ
    "z": "\u1d22",  # ᴢ
    "A": "\u0410\u0391\u13aa\u04d0",  # А Α Ꭺ Ӑ
    "B": "\u0412\u0392\u13f4",  # В Β Ᏼ
    "C": "\u0421\u03f9\u13df\u216d",  # С Ϲ Ꮯ Ⅽ
    "D": "\u13a0\u216e",  # Ꭰ Ⅾ
    "E": "\u0415\u0395\u13ac\u0400\u0401",  # Е Ε Ꭼ Ѐ Ё
    "G": "\u050c\u13c0",  # Ԍ Ꮐ
    "H": "\u041d\u0397\u13bb",  # Н Η Ꮋ
    "I": "\u0406\u0399\u04c0\u2160",  # І Ι Ӏ Ⅰ
    "J": "\u0408\u13ab",  # Ј Ꭻ
    "K": "\u041a\u039a\u13e6",  # К Κ Ꮶ
    "L": "\u13de\u216c",  # Ꮮ Ⅼ
    "M": "\u041c\u039c\u13b7\u216f",  # М Μ Ꮇ Ⅿ
    "N": "\u039d",  # Ν
    "O": "\u041e\u039f\u0555",  # О Ο Օ
    "P": "\u0420\u03a1\u13e2",  # Р Ρ Ꮲ
    "Q": "\u051a",  # Ԛ
    "S": "\u0405\u13da",  # Ѕ Ꮪ
    "T": "\u0422\u03a4\u13a2",  # Т Τ Ꭲ
    "V": "\u13d9\u2164",  # Ꮩ Ⅴ
    "W": "\u051c\u13b3",  # Ԝ Ꮃ
    "X": "\u0425\u03a7\u2169",  # Х Χ Ⅹ
    "Y": "\u04ae\u03a5",  # Ү Υ
    "Z": "\u0396\u13c3",  # Ζ Ꮓ
}
CONFUSABLES: dict[int, str] = {
    ord(ch): latin for latin, group in _CONFUSABLE_GROUPS.items() for ch in group
}
_CONFUSABLE_RE = re.compile("[" + "".join(chr(c) for c in CONFUSABLES) + "]")

# Letters spelled out with one separator between them ("i g n o r e", "i.g.n.o.r.e"): a run of
# at least four single letters is read as one word.
_SPACED_RE = re.compile(r"(?<![^\W_])(?:[^\W\d_][ .\-_*|]){3,}[^\W\d_](?![^\W_])")


def strip_format(text: str) -> str:
    """`text` without format characters, which only hide or split what the model reads."""
    return "".join(ch for ch in text if not is_format(ch)) if _has_format(text) else text


def _has_format(text: str) -> bool:
    return any(is_format(ch) for ch in text)


def fold_confusables(text: str) -> str:
    """Look-alike letters of other scripts replaced by the Latin letter they imitate."""
    return text.translate(CONFUSABLES)


def confusable_examples(text: str, limit: int = 3) -> list[str]:
    """Up to `limit` descriptions of look-alike letters in Latin words or in words made of
    look-alikes only, e.g. "'ignоre' has U+043E CYRILLIC SMALL LETTER O"."""
    found: list[str] = []
    for word in re.findall(r"\w+", text):
        odd = [ch for ch in word if ord(ch) in CONFUSABLES]
        if odd and (len(odd) == len(word) or any("a" <= ch.lower() <= "z" for ch in word)):
            ch = odd[0]
            found.append(f"'{word[:40]}' has U+{ord(ch):04X} {unicodedata.name(ch, '?')}")
            if len(found) >= limit:
                break
    return found


def unspaced(text: str) -> str:
    """Runs of single letters separated by one space, dot or dash joined into words."""
    return _SPACED_RE.sub(lambda m: re.sub(r"[ .\-_*|]", "", m.group()), text)


def normal_forms(text: str) -> tuple[str, str]:
    """What the patterns read: the NFKC text without format characters, and the same text with
    look-alike letters folded to Latin and spaced-out letters joined (empty when identical)."""
    plain = unicodedata.normalize("NFKC", strip_format(text))
    folded = unspaced(fold_confusables(plain))
    return plain, ("" if folded == plain else folded)


def has_confusables(text: str) -> bool:
    return _CONFUSABLE_RE.search(text) is not None
