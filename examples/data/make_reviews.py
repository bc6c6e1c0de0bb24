"""Write ``reviews.csv``: a small synthetic sentiment data set for the ``csv`` workload.

Deterministic (seeded): running it again gives the same bytes. Each review mixes neutral filler
with a few sentiment words, each from its own label's list with probability 0.7 and from the
other list otherwise, so a review's label is a noisy majority vote; about 3% of the labels are
flipped as noise.

    python examples/data/make_reviews.py            # writes examples/data/reviews.csv
    python examples/data/make_reviews.py --rows 2000 --out /tmp/reviews.csv
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

POSITIVE = (
    "great",
    "excellent",
    "wonderful",
    "delightful",
    "superb",
    "enjoyable",
    "charming",
    "brilliant",
    "moving",
    "fun",
    "beautiful",
    "clever",
    "fresh",
    "satisfying",
    "gripping",
    "memorable",
    "touching",
    "funny",
    "solid",
    "recommended",
)
NEGATIVE = (
    "awful",
    "boring",
    "terrible",
    "dull",
    "tedious",
    "disappointing",
    "clumsy",
    "bland",
    "messy",
    "annoying",
    "forgettable",
    "weak",
    "predictable",
    "slow",
    "confusing",
    "painful",
    "lazy",
    "flat",
    "overlong",
    "waste",
)
SUBJECTS = (
    "the film",
    "this movie",
    "the plot",
    "the acting",
    "the soundtrack",
    "the ending",
    "the script",
    "the cast",
    "the director's work",
    "the second half",
    "the dialogue",
)
FILLER = (
    "honestly",
    "overall",
    "to be fair",
    "in the end",
    "for me",
    "at times",
    "mostly",
    "really",
    "quite",
    "somewhat",
    "frankly",
    "all in all",
)
TEMPLATES = (
    "{subject} was {a} and {b}.",
    "{filler}, {subject} felt {a}.",
    "{subject} is {a}, {filler} {b}.",
    "I found {subject} {a}; {filler} {b}.",
    "{filler} it was {a}, and {subject} was {b}.",
)


def make_reviews(rows: int = 4000, seed: int = 0, noise: float = 0.03) -> list[tuple[str, str]]:
    """``rows`` (review, sentiment) pairs, half positive and half negative, shuffled."""
    rng = random.Random(seed)
    data = []
    for i in range(rows):
        label = "positive" if i % 2 == 0 else "negative"
        own, other = (POSITIVE, NEGATIVE) if label == "positive" else (NEGATIVE, POSITIVE)
        sentences = []
        for _ in range(rng.randint(1, 3)):
            a, b = (rng.choice(own if rng.random() < 0.7 else other) for _ in range(2))
            template = rng.choice(TEMPLATES)
            text = template.format(
                subject=rng.choice(SUBJECTS), filler=rng.choice(FILLER), a=a, b=b
            )
            sentences.append(text[0].upper() + text[1:])
        if rng.random() < noise:
            label = "negative" if label == "positive" else "positive"
        data.append((" ".join(sentences), label))
    rng.shuffle(data)
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("reviews.csv"))
    args = parser.parse_args()
    with args.out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["review", "sentiment"])
        writer.writerows(make_reviews(args.rows, args.seed))
    print(f"wrote {args.rows} reviews to {args.out}")


if __name__ == "__main__":
    main()
