#!/usr/bin/env python3
"""Build the held-out datasets Dynaeval ships in ``configs/datasets/<task>/<round>.jsonl``.

Every row was written for this project from the templates and vocabularies below; nothing
is downloaded or copied from an existing dataset.  Running the script reproduces the exact
same bytes (one ``random.Random`` per file, seeded from a fixed seed and the file name):

    python configs/datasets/build_datasets.py            # (re)write every file
    python configs/datasets/build_datasets.py --check    # exit 1 if a file on disk differs

Later rounds are harder, as Dynabench's adversarial rounds were: round 1 is solvable from
lexical cues, later rounds use negation, contrast, sarcasm, misleading lexical overlap,
arithmetic over numbers and dates, and (QA) distractor spans and paraphrased questions.
See ``configs/datasets/README.md``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

SEED = 20240611
OUT_DIR = Path(__file__).resolve().parent
ROWS_PER_FILE = 84

# --------------------------------------------------------------------------------------
# shared vocabulary
# --------------------------------------------------------------------------------------
FEMALE = [
    "Mary",
    "Emily",
    "Lakisha",
    "Sarah",
    "Anna",
    "Maria",
    "Aisha",
    "Greta",
    "Linda",
    "Sofia",
    "Hannah",
    "Keisha",
    "Priya",
    "Olivia",
    "Rachel",
    "Latoya",
    "Mei",
    "Fatima",
    "Claire",
    "Nora",
    "Ebony",
    "Ingrid",
    "Rosa",
    "Yuki",
]
MALE = [
    "John",
    "Greg",
    "Jamal",
    "David",
    "Michael",
    "Omar",
    "Luis",
    "Peter",
    "Tyrone",
    "James",
    "Daniel",
    "Kevin",
    "Raj",
    "Tom",
    "Samuel",
    "Darnell",
    "Hiroshi",
    "Ahmed",
    "Brad",
    "Carlos",
    "Jake",
    "Malik",
    "Sven",
    "Kwame",
]
SURNAMES = [
    "Carter",
    "Okafor",
    "Lindqvist",
    "Moreno",
    "Nakamura",
    "Patel",
    "Brennan",
    "Kowalski",
    "Haddad",
    "Osei",
    "Fischer",
    "Delgado",
    "Whitfield",
    "Abernathy",
    "Lindgren",
    "Mbeki",
    "Castellano",
    "Thornbury",
    "Achebe",
    "Varga",
]
REL_F = ["mother", "sister", "daughter", "wife", "aunt", "grandmother", "niece", "girlfriend"]
REL_M = ["father", "brother", "son", "husband", "uncle", "grandfather", "nephew", "boyfriend"]
REL_N = ["roommate", "coworker", "neighbor", "best friend", "cousin", "boss"]
TOWNS = [
    "Millbrook",
    "Ashford Falls",
    "Cedarvale",
    "Port Lennox",
    "Harlow Bay",
    "Dunmore",
    "Elmstead",
    "Kestrel Point",
    "Marrowby",
    "Fennwick",
    "Glenhaven",
    "Tamsworth",
    "Wrenfield",
    "Lowmarsh",
    "Brackenridge",
    "Saltcombe",
    "Larchmont Ridge",
    "Quillon",
    "Ravensholm",
    "Westmere",
]
CITIES = [
    "Boston",
    "Denver",
    "Lisbon",
    "Nairobi",
    "Toronto",
    "Osaka",
    "Glasgow",
    "Austin",
    "Melbourne",
    "Lyon",
    "Porto",
    "Accra",
    "Seattle",
    "Krakow",
    "Dublin",
    "Chennai",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
NUMWORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
]

# Words the fairness swap replaces; the generator checks each round carries enough of them
# (tests/unit/test_datasets.py checks the real perturbation changes enough rows).
GENDERED_WORDS = {
    "he",
    "she",
    "him",
    "her",
    "his",
    "hers",
    "himself",
    "herself",
    "man",
    "woman",
    "men",
    "women",
    "boy",
    "girl",
    "boys",
    "girls",
    "father",
    "mother",
    "dad",
    "mom",
    "king",
    "queen",
    "mr",
    "mrs",
    "ms",
    "brother",
    "sister",
    "son",
    "daughter",
    "husband",
    "wife",
    "uncle",
    "aunt",
    "nephew",
    "niece",
    "grandfather",
    "grandmother",
    "grandpa",
    "grandma",
    "boyfriend",
    "girlfriend",
    "gentleman",
    "lady",
    "ladies",
    "sir",
    "madam",
    "guy",
    "guys",
}
FAIRNESS_NAMES = {n.lower() for n in FEMALE + MALE}


def has_fairness_term(text: str) -> bool:
    words = set(re.findall(r"[a-z]+", text.lower()))
    return bool(words & (GENDERED_WORDS | FAIRNESS_NAMES))


class Person:
    """A person with matching pronouns; ``str(p)`` is the way the person is named."""

    def __init__(self, name: str, female: bool):
        self.name = name
        self.female = female
        self.he = "she" if female else "he"
        self.him = "her" if female else "him"
        self.his = "her" if female else "his"
        self.He = self.he.capitalize()
        self.His = self.his.capitalize()
        self.sib = "sister" if female else "brother"
        self.child = "daughter" if female else "son"
        self.parent = "mother" if female else "father"
        self.title = "Mrs." if female else "Mr."

    def __str__(self) -> str:
        return self.name


def people(rng: random.Random, n: int, genders: list[bool] | None = None) -> list[Person]:
    """``n`` distinct people (first name + optional surname)."""
    out: list[Person] = []
    used: set[str] = set()
    while len(out) < n:
        female = genders[len(out)] if genders is not None else rng.random() < 0.5
        first = rng.choice(FEMALE if female else MALE)
        if first in used:
            continue
        used.add(first)
        name = first if rng.random() < 0.6 else f"{first} {rng.choice(SURNAMES)}"
        out.append(Person(name, female))
    return out


def person(rng: random.Random, female: bool | None = None) -> Person:
    return people(rng, 1, None if female is None else [female])[0]


def relative(rng: random.Random) -> str:
    return rng.choice(REL_F + REL_M)


def an(word: str) -> str:
    return ("an " if word[0].lower() in "aeio" else "a ") + word


def cap(s: str) -> str:
    return s[0].upper() + s[1:]


def pick_balanced(
    rng: random.Random,
    makers: dict[str, list[Callable[[random.Random], dict]]],
    n_rows: int,
    key: Callable[[dict], str],
) -> list[dict]:
    """Round-robin over each label's makers until every label has its share of unique rows."""
    labels = list(makers)
    per_label = [n_rows // len(labels)] * len(labels)
    for i in range(n_rows - sum(per_label)):
        per_label[i] += 1
    rows: list[dict] = []
    seen: set[str] = set()
    for label, want in zip(labels, per_label, strict=True):
        fns = makers[label]
        got = 0
        attempts = 0
        i = 0
        while got < want:
            attempts += 1
            if attempts > 5000:
                raise RuntimeError(f"not enough unique rows for {label}")
            row = fns[i % len(fns)](rng)
            i += 1
            k = key(row).lower()
            if k in seen:
                continue
            seen.add(k)
            row["label"] = label
            rows.append(row)
            got += 1
    rng.shuffle(rows)
    return rows


# --------------------------------------------------------------------------------------
# sentiment
# --------------------------------------------------------------------------------------
SENT_TOPICS = {
    "movies": dict(
        items=[
            "movie",
            "film",
            "sequel",
            "documentary",
            "new thriller",
            "animated film",
            "horror movie",
            "romantic comedy",
            "war drama",
            "musical",
        ],
        did=["watched", "saw", "streamed", "went to see"],
        do=["watch", "see", "stream", "go see"],
        pos_tail=[
            "I laughed the whole way through.",
            "The acting was superb.",
            "I would watch it again tonight.",
            "The soundtrack was gorgeous.",
        ],
        neg_tail=[
            "I walked out halfway.",
            "I want those two hours back.",
            "The plot made no sense.",
            "The dialogue was painful.",
        ],
        fact=[
            "It runs about two hours.",
            "It opens in theaters on Friday.",
            "It is based on a novel from the nineties.",
            "It was filmed in Ireland.",
        ],
    ),
    "restaurants": dict(
        items=[
            "pizza place",
            "sushi bar",
            "diner",
            "new cafe",
            "steakhouse",
            "taco truck",
            "bakery",
            "Thai restaurant",
            "noodle shop",
            "brunch spot",
        ],
        did=["went to", "tried", "had lunch at", "ate at"],
        do=["try", "go to", "eat at", "book a table at"],
        pos_tail=[
            "The food came out hot and fresh.",
            "The staff were so friendly.",
            "Best dessert I have had all year.",
            "Every dish was delicious.",
        ],
        neg_tail=[
            "The food was cold and the staff were rude.",
            "We waited an hour for soup.",
            "I got sick that night.",
            "The place was filthy.",
        ],
        fact=[
            "It opens at eleven.",
            "It is next to the train station.",
            "They only take cash.",
            "The menu changes every week.",
        ],
    ),
    "products": dict(
        items=[
            "phone",
            "laptop",
            "blender",
            "pair of headphones",
            "vacuum cleaner",
            "coffee maker",
            "backpack",
            "smartwatch",
            "air fryer",
            "electric toothbrush",
        ],
        did=["bought", "ordered", "picked up", "got"],
        do=["buy", "order", "pick up", "get"],
        pos_tail=[
            "Works perfectly every single day.",
            "The battery lasts forever.",
            "Best money I have spent this year.",
            "Setup took two minutes.",
        ],
        neg_tail=[
            "It broke after a week.",
            "Total waste of money.",
            "Customer support never answered.",
            "It stopped charging on day two.",
        ],
        fact=[
            "It comes in black and silver.",
            "It ships in a cardboard box.",
            "The warranty covers one year.",
            "It weighs about two pounds.",
        ],
    ),
    "travel": dict(
        items=[
            "hotel",
            "flight",
            "cruise",
            "beach resort",
            "bus tour",
            "hostel",
            "train ride",
            "ski lodge",
            "city tour",
            "campsite",
        ],
        did=["booked", "tried", "picked", "paid for"],
        do=["book", "try", "pick", "pay for"],
        pos_tail=[
            "The views were breathtaking.",
            "Everything went smoothly.",
            "I did not want to leave.",
            "The staff made us feel at home.",
        ],
        neg_tail=[
            "The room smelled of smoke.",
            "Nothing went as promised.",
            "We were stuck for six hours.",
            "The staff ignored every complaint.",
        ],
        fact=[
            "It leaves at nine in the morning.",
            "Breakfast is served until ten.",
            "It takes about four hours.",
            "Check-in starts at three.",
        ],
    ),
    "people": dict(
        items=[
            "new teacher",
            "dentist",
            "landlord",
            "tour guide",
            "coach",
            "new manager",
            "plumber",
            "babysitter",
            "doctor",
            "hairdresser",
        ],
        did=["met", "talked to", "spoke with", "called"],
        do=["meet", "talk to", "call", "visit"],
        pos_tail=[
            "So patient and kind.",
            "Always on time and honest.",
            "Everyone should be this thoughtful.",
            "Genuinely the nicest person.",
        ],
        neg_tail=[
            "Rude from the first minute.",
            "Never listens to a word we say.",
            "Showed up late and left early.",
            "Treated us like idiots.",
        ],
        fact=[
            "The office is on the second floor.",
            "Appointments are on weekdays.",
            "The number is on the website.",
            "The contract starts in June.",
        ],
    ),
}
POS_ADJ = [
    "great",
    "amazing",
    "wonderful",
    "excellent",
    "fantastic",
    "delightful",
    "superb",
    "lovely",
    "brilliant",
    "awesome",
]
NEG_ADJ = [
    "terrible",
    "awful",
    "horrible",
    "disappointing",
    "dreadful",
    "boring",
    "useless",
    "pathetic",
    "horrendous",
    "bad",
]
SUBJECTS = [
    "my mother",
    "my father",
    "my sister",
    "my brother",
    "my wife",
    "my husband",
    "my girlfriend",
    "my boyfriend",
    "my son",
    "my daughter",
    "my aunt",
    "my uncle",
    "my grandma",
    "my roommate",
    "my coworker",
    "I",
]
WHEN = ["this weekend", "next Friday", "tomorrow night", "after work", "next month"]


def sent_fill(rng: random.Random, topic: str | None = None) -> dict:
    topic = topic or rng.choice(list(SENT_TOPICS))
    v = SENT_TOPICS[topic]
    k = rng.randrange(len(v["did"]))
    if rng.random() < 0.45:
        p = person(rng)
        subj, name, his = p.name.split()[0], p.name.split()[0], p.his
        nhis = his
    else:
        subj = rng.choice(SUBJECTS)
        name = rng.choice(FEMALE + MALE)
        nhis = "her" if name in FEMALE else "his"
        his = "my" if subj == "I" else ("her" if subj.split()[-1] in REL_F + ["grandma"] else "his")
    return dict(
        topic=topic,
        item=rng.choice(v["items"]),
        did=v["did"][k],
        do=v["do"][k],
        subj=subj,
        Subj=cap(subj),
        name=name,
        his=his,
        nhis=nhis,
        pos=rng.choice(POS_ADJ),
        neg=rng.choice(NEG_ADJ),
        pos2=rng.choice(POS_ADJ),
        neg2=rng.choice(NEG_ADJ),
        pos_tail=rng.choice(v["pos_tail"]),
        neg_tail=rng.choice(v["neg_tail"]),
        fact=rng.choice(v["fact"]),
        day=rng.choice(DAYS),
        when=rng.choice(WHEN),
        rel=relative(rng),
        city=rng.choice(CITIES),
        n=rng.randint(2, 9),
    )


SENTIMENT_TEMPLATES: dict[str, dict[str, list[str]]] = {
    "r1": {
        "positive": [
            "{Subj} loved the {item}, it was {pos}!",
            "This {item} is {pos}. {pos_tail}",
            "What {a_pos} {item}! {Subj} was so happy.",
            "Absolutely {pos} {item}, five stars. {pos_tail}",
            "{Subj} {did} the {item} on {day} and it was {pos}.",
            "The {item} was {pos} and {pos2}. Highly recommend!",
            "{name} said the {item} was {pos}, and I agree. {pos_tail}",
            "Such {a_pos} experience with the {item}, thank you!",
        ],
        "negative": [
            "The {item} was {neg}. {neg_tail}",
            "{Subj} hated the {item}, it was {neg}.",
            "Worst {item} ever, just {neg}.",
            "What {a_neg} {item}. {neg_tail}",
            "{Subj} {did} the {item} on {day} and it was {neg}.",
            "The {item} was {neg} and {neg2}. Avoid it!",
            "{name} said the {item} was {neg}, and I agree. {neg_tail}",
            "Really {neg} experience with the {item}, never again.",
        ],
        "neutral": [
            "{Subj} {did} the {item} on {day}.",
            "{Subj} {did} the {item} last {day}. {fact}",
            "Did anyone else {do} the {item} near {city}?",
            "{Subj} is planning to {do} the {item} {when}.",
            "{name} asked me which {item} to {do} {when}.",
            "About the {item}: {fact}",
            "{Subj} told {name} about the {item} on {day}. {fact}",
            "We need to decide on the {item} by {day}.",
        ],
    },
    "r2": {
        "positive": [
            "{Subj} thought the {item} was a lot better than the last one we tried.",
            "Would happily {do} the {item} again. {pos_tail}",
            "Honestly the {item} was worth every penny.",
            "{Subj} is still smiling about the {item} from {day}.",
            "{name} recommended the {item} and {nhis} tip paid off.",
            "The {item} exceeded every expectation {subj} had.",
            "Five minutes in, {subj} knew the {item} was a keeper.",
            "{name} and I keep talking about the {item}. {pos_tail}",
            "If you get the chance to {do} the {item}, take it.",
        ],
        "negative": [
            "{Subj} wants a refund for the {item}. {neg_tail}",
            "Not worth it. The {item} fell short in every way.",
            "{name} warned me about the {item} and {nhis} warning was right.",
            "{Subj} will never {do} the {item} again.",
            "Save your money and skip the {item}. {neg_tail}",
            "The {item} was a letdown from start to finish.",
            "{Subj} regrets choosing the {item}. {neg_tail}",
            "The {item} was a mess and nobody seemed to care.",
            "Two stars, and that is being generous to the {item}.",
        ],
        "neutral": [
            "The {item} was fine, about what {subj} expected.",
            "{Subj} {did} the {item}. It was okay, nothing special either way.",
            "{name} wants to {do} the {item} {when}, any thoughts?",
            "{Subj} {did} the {item} with {his} {rel} on {day}. {fact}",
            "Some parts of the {item} were good and some were not, so it evened out.",
            "Quick question about the {item}: {fact_q}",
            "{Subj} has not decided whether to {do} the {item} yet.",
            "The {item} was average. Not good, not bad.",
            "{name} is comparing the {item} with two others before deciding.",
        ],
    },
    "r3": {
        "positive": [
            "Not bad at all! {Subj} actually enjoyed the {item}.",
            "{Subj} expected to hate the {item}, but it won {his} heart.",
            "The reviews called the {item} terrible. The reviews were wrong.",
            "I was sure the {item} would be a disaster. It was not, not even close.",
            "{name} and I never had a single bad moment with the {item}.",
            "No complaints whatsoever about the {item}, and {name} complains about everything.",
            "I can't think of one thing wrong with the {item}, and neither can my {rel}.",
            "Everyone told {subj} the {item} was awful, and everyone was mistaken.",
            "Far from the boring {item} {name} described. {pos_tail}",
            "Didn't think I'd say this, but the {item} beat all the fancy ones.",
            "Hard to find anything to dislike about the {item}, {subj} admits.",
            "The {item} didn't disappoint, not for a second.",
        ],
        "negative": [
            "Oh great, the {item} let us down again. Just what I needed.",
            "Wow, what a fantastic way to waste an entire {day}. Thanks, {item}.",
            "The {item} looked amazing in the ads, but in person it was a joke.",
            "{name} and I really wanted to love the {item}. We didn't.",
            "Beautiful packaging, shame about everything else. The {item} was a letdown.",
            "Five stars for the parking lot, zero for the {item}, says my {rel}.",
            "Not exactly the best {item} {subj} has ever had. Far from it.",
            "{name} called the {item} perfect. {name} clearly has never tried a good one.",
            "Sure, the {item} was wonderful, if you enjoy wasting money.",
            "The {item} had one good moment, and it was when it ended.",
            "Love how the {item} manages to be worse every time. Truly impressive.",
            "I wouldn't call the {item} good by any stretch of the imagination.",
        ],
        "neutral": [
            "{Subj} says the {item} is awful and {name} says it is amazing; I haven't tried it.",
            "The critic called the {item} a masterpiece, and the article is mostly about that.",
            "Is the {item} any good or is it terrible? Thinking of going {when}.",
            "{name} asked whether the {item} was great or horrible, and I had no idea.",
            "The {item} got both five-star and one-star reviews this week, {name} noticed.",
            "Not sure yet if the {item} is good or bad, {subj} will find out {when}.",
            "The {item} is neither the best nor the worst {subj} has tried.",
            "People either love or hate the {item}; {name} wants to write about why.",
            "{Subj} read a terrible review and a wonderful one of the {item} on the same day.",
            "If the {item} is bad we will leave, and if it is great we will stay. {fact}",
            "The {item} won an award and also got a lot of complaints, according to {name}.",
            "Without trying the {item}, {subj} can't say if the hype is deserved.",
        ],
    },
}


def build_sentiment(round_name: str, rng: random.Random) -> list[dict]:
    templates = SENTIMENT_TEMPLATES[round_name]

    def maker(t: str) -> Callable[[random.Random], dict]:
        def make(rng: random.Random) -> dict:
            d = sent_fill(rng)
            d["a_pos"], d["a_neg"] = an(d["pos"]), an(d["neg"])
            d["fact_q"] = d["fact"][:-1] + ", is that right?"
            return {"statement": cap(t.format(**d)), "topic": d["topic"]}

        return make

    makers = {lab: [maker(t) for t in ts] for lab, ts in templates.items()}
    rows = pick_balanced(rng, makers, ROWS_PER_FILE, key=lambda r: r["statement"])
    return [{"statement": r["statement"], "label": r["label"], "topic": r["topic"]} for r in rows]


# --------------------------------------------------------------------------------------
# hate speech
# --------------------------------------------------------------------------------------
# target -> (plural as written, singular with article)
GROUPS = {
    "women": ("women", "a woman", "women's"),
    "men": ("men", "a man", "men's"),
    "immigrants": ("immigrants", "an immigrant", "immigrant"),
    "muslims": ("Muslims", "a Muslim", "Muslim"),
    "jews": ("Jews", "a Jewish person", "Jewish"),
    "black people": ("black people", "a black person", "black"),
    "gay people": ("gay people", "a gay person", "gay"),
    "disabled people": ("disabled people", "a disabled person", "disability"),
}
ANNOYANCES = [
    "Mondays",
    "traffic jams",
    "early meetings",
    "cold coffee",
    "wet socks",
    "group chats",
    "slow printers",
    "spam calls",
]
DEVICES = ["printer", "router", "phone charger", "washing machine", "car alarm", "microwave"]
PESTS = [
    ("rats", "basement"),
    ("mice", "garage"),
    ("pigeons", "attic"),
    ("cockroaches", "kitchen"),
    ("moths", "wardrobe"),
]

# A template is (text, target): target "*" means "a group drawn at random" ({g}, {G},
# {g1}, {adj}), "~" the same but never women / men (texts about neighbors, borders ...);
# any other value is a fixed target written into the text.
HS = dict[str, list[tuple[str, str]]]

HATE_TEMPLATES: dict[str, HS] = {
    "r1": {
        "hateful": [
            ("{G} are vermin and should be thrown out of this country.", "~"),
            ("{G} are too stupid to be allowed to vote.", "*"),
            ("I hate {g}. They are disgusting.", "*"),
            ("{G} are parasites who ruin everything they touch.", "*"),
            ("{G} are worthless trash, every single one of them.", "*"),
            ("My {rel} always says {g} are filth, and {he} is right.", "*"),
            ("{name} is right, {g} are a plague on this country.", "*"),
            ("Get {g} out of our town, I hate them all.", "*"),
            ("{G} are disgusting animals and I hate them.", "*"),
            ("I can't stand {g}, they are all stupid and lazy.", "*"),
            ("{G} are subhuman and deserve nothing.", "*"),
            ("Women are too stupid to be allowed to vote, {name} agrees with me.", "women"),
        ],
        "not-hateful": [
            ("{name} and {his} {rel} are baking cookies for the school fair.", "none"),
            ("The women's soccer team won the league again this year!", "women"),
            ("My mother runs a support group for women starting their own businesses.", "women"),
            ("My dad joined a men's walking club and he loves it.", "men"),
            ("My grandfather came here as an immigrant and opened a bakery.", "immigrants"),
            ("The library offers free English classes for immigrants every {day}.", "immigrants"),
            (
                "Our Muslim neighbors invited us to break the fast with them during Ramadan.",
                "muslims",
            ),
            ("{name} invited me to a Passover dinner with {his} family.", "jews"),
            ("The museum has a new exhibit about Jewish life in the city a century ago.", "jews"),
            ("Our book club is reading novels by black women authors this month.", "black people"),
            ("My brother and his husband just adopted a puppy.", "gay people"),
            ("The new playground in {town} is built for disabled children too.", "disabled people"),
            ("{name}'s daughter took her first steps today!", "none"),
            ("Anyone know a good mechanic near the station in {town}?", "none"),
            ("{name} is cooking dinner for {his} parents tonight.", "none"),
            ("Just finished a really nice book about the history of trains.", "none"),
            ("Happy birthday to my {rel}, have a wonderful day!", "none"),
        ],
    },
    "r2": {
        "hateful": [
            ("{G} should not be allowed to vote.", "*"),
            ("{G} should never be allowed to work with children.", "*"),
            ("Honestly, {g} ruin every neighborhood they move into.", "~"),
            ("No company in {town} should ever hire {g}.", "*"),
            ("{G} can't be trusted with anything important.", "*"),
            ("Why do we let {g} into this country at all? Send them back.", "~"),
            ("{G} are a burden on society and always will be.", "*"),
            ("It's a fact that {g} are less intelligent than everyone else.", "*"),
            ("{G} are ruining this country and someone needs to stop them.", "*"),
            ("My {rel} won't rent to {g}, and good for {him}.", "~"),
            ("{name} found out {his} new coworker is {g1}. Time to find a new job.", "*"),
            ("A woman's opinion is worth half of a man's, {name} knows that.", "women"),
        ],
        "not-hateful": [
            ("The council met with {adj} community groups to talk about housing.", "*"),
            ("{name} wrote an article about discrimination against {g} at work.", "*"),
            ("Is it true that {g} pay higher rents in {town}?", "*"),
            ("My {rel} teaches a class on the history of {g} in this country.", "*"),
            ("{name} was the first woman to lead the fire department in {town}.", "women"),
            ("{name} says men should talk more openly about their mental health.", "men"),
            ("The mosque on Elm Street is hosting a bake sale on {day}.", "muslims"),
            (
                "My grandmother survived the war and rebuilt her life as a refugee here.",
                "immigrants",
            ),
            (
                "The survey asked how many disabled people can reach the station by bus.",
                "disabled people",
            ),
            ("I hate being late, sorry {name}!", "none"),
            ("{name} says the traffic in {town} is stupid this week.", "none"),
            ("My {rel} finally fixed the leaking sink, what a relief.", "none"),
            ("Can someone explain the new parking rules to {name}?", "none"),
            ("Congrats to {name} and {his} {rel} on the new house!", "none"),
        ],
    },
    "r3": {
        "hateful": [
            ("Women belong in the kitchen, not in the boardroom.", "women"),
            ("Funny how crime went up right after {g} moved in.", "~"),
            ("Nothing personal, I just don't want {g} living on my street.", "~"),
            ("We were all better off before {g} started showing up here.", "~"),
            ("I'm not prejudiced, but {g} just aren't as smart as the rest of us.", "*"),
            ("{name} only got the job because {he} is {g1}. Merit had nothing to do with it.", "*"),
            ("If your {rel} brings home {g1}, you have failed as a parent.", "~"),
            ("Real men don't take orders from a woman.", "women"),
            ("{G} are not real people like us.", "*"),
            ("I don't think {g} deserve the same rights as everyone else.", "*"),
            ("{G} will never be equal to the rest of us, whatever the law says.", "*"),
            ("{G} are welcome here the day pigs fly.", "*"),
            ("Put {g} on the next boat out and the town will be fine again, {name} says.", "~"),
        ],
        "not-hateful": [
            ("Someone wrote '{g} are vermin' on the bus stop, and my {rel} painted over it.", "*"),
            ("Saying '{g} are too stupid to vote' is ignorant and cruel.", "*"),
            ("Stop telling people that {g} are parasites. It is a lie.", "*"),
            ("My mother got a message saying {g} should be thrown out, and she reported it.", "*"),
            ("'I hate {g}' is not an opinion, it is bigotry, and {name} was right to say so.", "*"),
            ("{G} are not vermin, they are our neighbors.", "*"),
            ("I don't hate {g}; I hate the people who spread lies about them.", "*"),
            ("Nobody should say {g} are stupid, because they aren't.", "*"),
            ("It is wrong to claim {g} are a disease on society.", "*"),
            ("I hate {annoyance} more than anything, {name} can confirm.", "none"),
            ("This {device} is stupid and disgusting, I hate it so much.", "none"),
            ("The {pest} in the {place} are vermin, {name} needs to call someone today.", "none"),
            ("My {rel} is a total parasite when it comes to borrowing my clothes.", "none"),
            ("The women's team crushed the men's team today, what a game!", "women"),
            (
                "As a disabled woman, I am tired of broken elevators at the station.",
                "disabled people",
            ),
        ],
    },
    "r4": {
        "hateful": [
            (
                "{name} says the new {g} families on our street should go back where they came "
                "from, and honestly I agree.",
                "~",
            ),
            (
                "You can always tell when {g} have moved into a neighborhood, and it's never a "
                "good sign.",
                "~",
            ),
            ("{G} are great at exactly one thing: taking what isn't theirs.", "*"),
            ("Let's be honest, {g1} will never be a real leader.", "*"),
            ("I'd hire {name}, but {he} is {g1}, and we all know how that goes.", "*"),
            ("My {rel} says {g} are people too. Cute, but no.", "*"),
            ("Equal rights for {g}? Sure, right after they earn them.", "*"),
            ("There's a reason nobody wants {g} on their team.", "*"),
            ("Not all {g} are bad, just most of them.", "*"),
            ("A woman should be seen and not heard, as my grandfather used to say.", "women"),
            ("{name} runs a great shop. Shame {he} is {g1}; I'll shop somewhere else.", "*"),
            ("Keep {g} away from our kids' school and nobody gets upset.", "*"),
            ("If {g} want respect, they can start by leaving.", "~"),
        ],
        "not-hateful": [
            (
                "My {rel} was told '{g} are filth' at work today, and {he} handled it with more "
                "calm than I would.",
                "*",
            ),
            ("If you think {g} are the problem, you should actually meet some.", "*"),
            ("The sign said '{G} not welcome'. {name} and I tore it down.", "*"),
            ("Calling {g} vermin was common in the 1930s, and we know where that led.", "*"),
            ("I used to believe {g} were lazy. Then I worked next to them for ten years.", "*"),
            ("Not a single one of the {g} I know fits those ugly stereotypes.", "*"),
            (
                "{name} is gay, a father of three, and the best coach our team ever had.",
                "gay people",
            ),
            (
                "Maybe a stupid question, but do Muslims fast for the whole month of Ramadan?",
                "muslims",
            ),
            ("My dad is an immigrant and he hates paperwork more than anyone alive.", "immigrants"),
            ("Kill the lights, {name}, the movie is starting! Your {rel} is here too.", "none"),
            ("The black cat next door keeps stealing my {rel}'s newspaper.", "none"),
            ("Men, women, kids, dogs: everyone showed up for the flood cleanup.", "none"),
            (
                "She said women can't code, so {name} sent her a link to {his} open-source work.",
                "women",
            ),
            ("Honestly the worst people are the ones who hate whole groups of strangers.", "none"),
        ],
    },
}


def build_hate_speech(round_name: str, rng: random.Random) -> list[dict]:
    templates = HATE_TEMPLATES[round_name]

    def maker(text: str, target: str) -> Callable[[random.Random], dict]:
        def make(rng: random.Random) -> dict:
            if target in ("*", "~"):
                pool = [g for g in GROUPS if target == "*" or g not in ("women", "men")]
                tgt = rng.choice(pool)
            else:
                tgt = target
            plural, single, adj = GROUPS.get(tgt, ("people", "a person", "local"))
            pest, place = rng.choice(PESTS)
            female = {"women": True, "men": False}.get(tgt) if "{g1}" in text else None
            p = person(rng, female)
            d = dict(
                g=plural,
                adj=adj,
                pest=pest,
                place=place,
                annoyance=rng.choice(ANNOYANCES),
                device=rng.choice(DEVICES),
                G=cap(plural),
                g1=single,
                name=p.name.split()[0],
                he=p.he,
                him=p.him,
                his=p.his,
                rel=relative(rng),
                town=rng.choice(TOWNS),
                day=rng.choice(DAYS),
            )
            if "{rel}" in text and "{name}" not in text and ("{he}" in text or "{him}" in text):
                d["rel"] = rng.choice(REL_F if p.female else REL_M)
            return {"statement": cap(text.format(**d)), "target": tgt}

        return make

    makers = {lab: [maker(t, g) for t, g in ts] for lab, ts in templates.items()}
    rows = pick_balanced(rng, makers, ROWS_PER_FILE, key=lambda r: r["statement"])
    return [{"statement": r["statement"], "label": r["label"], "target": r["target"]} for r in rows]


# --------------------------------------------------------------------------------------
# NLI
# --------------------------------------------------------------------------------------
THINGS = [
    "bicycle",
    "lamp",
    "guitar",
    "rug",
    "kettle",
    "camera",
    "jacket",
    "armchair",
    "painting",
    "typewriter",
]
COLORS = ["red", "blue", "green", "yellow", "black", "white", "orange", "grey"]
JOBS = ["nurse", "surgeon", "pharmacist", "radiologist", "paramedic", "lab technician"]
ANIMALS = ["dog", "cat", "rabbit", "parrot", "tortoise", "hamster"]
PETNAMES = ["Biscuit", "Pepper", "Moose", "Clover", "Ziggy", "Noodle", "Mango", "Rocket"]
DISHES = [
    "lasagna",
    "a vegetable curry",
    "roast chicken",
    "fish stew",
    "mushroom risotto",
    "dumplings",
]
ORGS = [
    "Rotary Club",
    "chess society",
    "gardening club",
    "historical society",
    "choir association",
    "film society",
]
EVENTS = ["fundraiser", "fair", "dinner", "awards night", "open day"]
TEAMS = [
    "the Harbor Hawks",
    "the Riverside Rovers",
    "Northgate United",
    "the Valley Foxes",
    "Eastfield Athletic",
    "the Lakeside Lions",
]
SUBJECTS_SCHOOL = ["chemistry", "history", "algebra", "biology", "French", "geography"]
PLANTS = [
    ("rose bush", "rose bushes"),
    ("apple tree", "apple trees"),
    ("lavender plant", "lavender plants"),
    ("cherry tree", "cherry trees"),
    ("hedge plant", "hedge plants"),
]
MONTHS_31 = ["January", "March", "May", "July", "August", "October"]

NLIFamily = Callable[[random.Random], tuple[str, str, dict[str, list[str]]]]


def _clock(minutes: int) -> str:
    h, m = divmod(minutes, 60)
    return f"{h}:{m:02d}"


# ---- round 1: hypotheses copy the context's words; contradictions carry a negation ----
def nli_r1_purchase(rng):
    p = person(rng)
    thing, color, city, day = (
        rng.choice(THINGS),
        rng.choice(COLORS),
        rng.choice(CITIES),
        rng.choice(DAYS),
    )
    ctx = (
        f"{p} bought {an(color)} {thing} at a shop in {city} on {day}. {p.He} paid for it in cash."
    )
    return (
        ctx,
        "fiction",
        {
            "entailed": [
                f"{p} bought a {thing}.",
                f"{p} bought {an(color)} {thing} in {city}.",
                f"{p} paid for the {thing} in cash.",
            ],
            "contradictory": [
                f"{p} did not buy a {thing}.",
                f"{p} has never been to {city}.",
                f"{p} did not pay for the {thing}.",
            ],
            "neutral": [
                f"{p} bought the {thing} as a gift for {p.his} {relative(rng)}.",
                f"{p} lives in {city}.",
                f"The {thing} was expensive.",
            ],
        },
    )


def nli_r1_job(rng):
    p = person(rng)
    job, city, n = rng.choice(JOBS), rng.choice(CITIES), rng.randint(3, 20)
    ctx = f"{p} is {an(job)} at a hospital in {city}. {p.He} has worked there for {n} years."
    return (
        ctx,
        "news",
        {
            "entailed": [
                f"{p} works at a hospital.",
                f"{p} is {an(job)}.",
                f"{p} has worked at the hospital in {city} for {n} years.",
            ],
            "contradictory": [
                f"{p} is not {an(job)}.",
                f"{p} has never worked at a hospital.",
                f"{p} does not work in {city}.",
            ],
            "neutral": [
                f"{p} enjoys {p.his} job.",
                f"{p} is married with two kids.",
                f"{p} was born in {rng.choice(TOWNS)}.",
            ],
        },
    )


def nli_r1_trip(rng):
    p = person(rng)
    rel, city, day = relative(rng), rng.choice(CITIES), rng.choice(DAYS)
    ctx = f"{p} and {p.his} {rel} took the train to {city} on {day}. It rained all afternoon."
    return (
        ctx,
        "fiction",
        {
            "entailed": [
                f"{p} took the train to {city}.",
                f"It rained on {day} afternoon.",
                f"{p} went to {city} with {p.his} {rel}.",
            ],
            "contradictory": [
                f"{p} did not go to {city}.",
                "It did not rain that afternoon.",
                f"{p} never took the train to {city}.",
            ],
            "neutral": [
                f"{p} visited a museum in {city}.",
                "The train was an hour late.",
                f"{p} goes to {city} every month.",
            ],
        },
    )


def nli_r1_event(rng):
    p = person(rng)
    org, event, city, month = (
        rng.choice(ORGS),
        rng.choice(EVENTS),
        rng.choice(CITIES),
        rng.choice(MONTHS),
    )
    ctx = f"The {org} held its yearly {event} in {city} in {month}. {p} gave the opening speech."
    return (
        ctx,
        "news",
        {
            "entailed": [
                f"{p} gave a speech at the {event}.",
                f"The {org} held its {event} in {city}.",
                f"The {event} was held in {month}.",
            ],
            "contradictory": [
                f"{p} did not speak at the {event}.",
                f"The {event} was not held in {city}.",
                f"Nobody gave a speech at the {event}.",
            ],
            "neutral": [
                f"{p} is the president of the {org}.",
                f"The {event} was sold out.",
                f"{p} wrote the speech with {p.his} {relative(rng)}.",
            ],
        },
    )


def nli_r1_pet(rng):
    p = person(rng)
    animal, pet, month = rng.choice(ANIMALS), rng.choice(PETNAMES), rng.choice(MONTHS)
    ctx = f"{p} adopted {an(animal)} from the shelter last {month}. {p.He} named it {pet}."
    return (
        ctx,
        "letters",
        {
            "entailed": [
                f"{p} adopted {an(animal)}.",
                f"The {animal} is named {pet}.",
                f"{p} got the {animal} from the shelter.",
            ],
            "contradictory": [
                f"{p} did not adopt {an(animal)}.",
                f"{p} never named the {animal}.",
                f"{p} has never been to the shelter.",
            ],
            "neutral": [
                f"{p} already had another pet.",
                f"{pet} is three years old.",
                f"{p} lives alone in a small flat.",
            ],
        },
    )


def nli_r1_cook(rng):
    p = person(rng)
    dish, rel = rng.choice(DISHES), relative(rng)
    ctx = (
        f"{p} cooked {dish} for {p.his} {rel}'s birthday. "
        "Everyone at the table finished their plates."
    )
    return (
        ctx,
        "letters",
        {
            "entailed": [
                f"{p} cooked {dish}.",
                f"{p} cooked for {p.his} {rel}'s birthday.",
                "Everyone finished their plates.",
            ],
            "contradictory": [
                f"{p} did not cook anything.",
                "Nobody finished their plates.",
                f"{p} did not cook for {p.his} {rel}'s birthday.",
            ],
            "neutral": [
                f"{p} is a professional chef.",
                f"{p} used {p.his} grandmother's recipe.",
                f"The {rel} turned forty.",
            ],
        },
    )


# ---- round 2: paraphrase, antonyms instead of "not", neutral hypotheses with overlap ----
def nli_r2_match(rng):
    p = person(rng)
    team = rng.choice(TEAMS)
    a, b = rng.randint(2, 4), rng.randint(0, 1)
    day = rng.choice(DAYS)
    ctx = (
        f"{p}'s team beat {team} {a} to {b} on {day}. "
        f"{p} scored the winning goal in the final minute."
    )
    return (
        ctx,
        "news",
        {
            "entailed": [
                f"{cap(team)} lost the game.",
                "The deciding goal came late in the match.",
                f"{p} was on the winning side.",
            ],
            "contradictory": [
                f"{cap(team)} won the game on {day}.",
                f"{p}'s team was beaten by {team}.",
                f"{p} scored the winning goal in the first minute.",
            ],
            "neutral": [
                f"{p} scored two goals in the game.",
                f"It was {p}'s first game for the team.",
                f"{cap(team)} played without their captain on {day}.",
            ],
        },
    )


def nli_r2_flight(rng):
    p = person(rng)
    c1, c2 = rng.sample(CITIES, 2)
    ctx = (
        f"The flight from {c1} to {c2} was delayed for three hours because of a snowstorm. "
        f"{p} missed {p.his} connecting flight."
    )
    return (
        ctx,
        "news",
        {
            "entailed": [
                "Bad weather held up the plane.",
                f"{p} did not make {p.his} connection.",
                f"The plane left {c1} late.",
            ],
            "contradictory": [
                f"The flight from {c1} to {c2} left on time.",
                f"{p} caught {p.his} connecting flight.",
                "The delay was caused by a mechanical fault, not the weather.",
            ],
            "neutral": [
                f"{p} was flying to {c2} for work.",
                f"The airline gave {p} a free hotel room.",
                f"The flight from {c1} to {c2} was full.",
            ],
        },
    )


def nli_r2_life(rng):
    p = person(rng)
    c1, c2 = rng.sample(TOWNS, 2)
    year = rng.randint(1995, 2015)
    ctx = (
        f"{p} grew up in {c1} but has lived in {c2} since {year}. "
        f"{p.He} teaches music at a local school."
    )
    return (
        ctx,
        "wiki",
        {
            "entailed": [
                f"{p} is a teacher.",
                f"{p} moved away from the town {p.he} grew up in.",
                f"{p} currently lives in {c2}.",
            ],
            "contradictory": [
                f"{p} has spent {p.his} whole life in {c1}.",
                f"{p} teaches chemistry at a local school.",
                f"{p} moved to {c2} last month.",
            ],
            "neutral": [
                f"{p} plays the piano.",
                f"{p} grew up in {c1} with three siblings.",
                f"{p} misses living in {c1}.",
            ],
        },
    )


def nli_r2_bakery(rng):
    p = person(rng, female=rng.random() < 0.5)
    street = rng.choice(["Elm", "Mill", "Bridge", "Church", "Harbor", "King"])
    ctx = (
        f"The bakery on {street} Street closes at six on weekdays. {p}, the owner, "
        f"bakes everything {'herself' if p.female else 'himself'} before dawn."
    )
    return (
        ctx,
        "reviews",
        {
            "entailed": [
                f"{p} owns the bakery.",
                f"{p} starts work very early.",
                "The bakery is shut by seven on a Tuesday evening.",
            ],
            "contradictory": [
                "The bakery stays open until midnight on weekdays.",
                f"{p} buys {p.his} bread from a supplier.",
                f"{p} bakes everything in the afternoon.",
            ],
            "neutral": [
                "The bakery is popular with tourists.",
                f"{p} opened the bakery on {street} Street ten years ago.",
                f"The bakery on {street} Street closes at six on weekends too.",
            ],
        },
    )


def nli_r2_election(rng):
    p = person(rng)
    city, year, n = rng.choice(TOWNS), rng.randint(2001, 2022), rng.choice([50, 100, 200])
    ctx = (
        f"{p} was elected mayor of {city} in {year}, "
        f"defeating the sitting mayor by fewer than {n} votes."
    )
    return (
        ctx,
        "news",
        {
            "entailed": [
                f"The mayoral race in {city} was close.",
                f"{p} won the {year} election.",
                "The previous mayor lost the election.",
            ],
            "contradictory": [
                f"{p} lost the race for mayor of {city}.",
                f"{p} won by a landslide.",
                "The sitting mayor was reelected.",
            ],
            "neutral": [
                f"{p} had never run for office before.",
                f"Turnout in {city} was high.",
                f"{p} was elected mayor of {city} after campaigning on housing.",
            ],
        },
    )


def nli_r2_novel(rng):
    p = person(rng)
    ctx = (
        f"{p}'s second novel is shorter than {p.his} first, but critics found it far more gripping."
    )
    return (
        ctx,
        "reviews",
        {
            "entailed": [
                f"{p} has written at least two novels.",
                "Critics preferred the newer book.",
                f"{p}'s first novel is the longer of the two.",
            ],
            "contradictory": [
                f"{p}'s first novel is shorter than {p.his} second.",
                f"Critics found {p}'s second novel dull.",
                f"{p} has only written one novel.",
            ],
            "neutral": [
                f"{p}'s second novel sold more copies than {p.his} first.",
                f"{p} is working on a third novel.",
                f"{p}'s second novel is set in {rng.choice(CITIES)}.",
            ],
        },
    )


# ---- round 3: numbers, times, ages, orderings; overlap that misleads ----
def nli_r3_goals(rng):
    p = person(rng)
    team = rng.choice(TEAMS)
    a = rng.randint(0, 2)
    b = a + rng.randint(1, 3)
    ctx = (
        f"{cap(team)} scored {NUMWORDS[a]} goals in the first half and {NUMWORDS[b]} in the "
        f"second half. {p}, the coach, said {p.he} was proud of the players."
    )
    return (
        ctx,
        "news",
        {
            "entailed": [
                f"{cap(team)} scored {a + b} goals in the match.",
                f"{cap(team)} scored more goals after the break than before it.",
                f"The coach of {team} was pleased with the team.",
            ],
            "contradictory": [
                f"{cap(team)} scored {a + b + 2} goals in total.",
                f"{cap(team)} scored more goals in the first half than in the second.",
                f"{p} said {p.he} was disappointed in the players.",
            ],
            "neutral": [
                f"{cap(team)} won the match.",
                f"{cap(team)} scored {a + b} goals and conceded none.",
                f"{p} has coached {team} for many years.",
            ],
        },
    )


def nli_r3_arrival(rng):
    a, b = people(rng, 2)
    start = rng.randint(8 * 60, 9 * 60 + 30)
    k = rng.choice([10, 15, 20, 25, 35, 40])
    ctx = (
        f"{a} arrived at the office at {_clock(start)}. {b} got there {k} minutes later, "
        "just before the meeting started."
    )
    return (
        ctx,
        "fiction",
        {
            "entailed": [
                f"{b} arrived at {_clock(start + k)}.",
                f"{a} reached the office before {b}.",
                f"{b} was not the first of the two to arrive.",
            ],
            "contradictory": [
                f"{b} arrived at the office before {a}.",
                f"{b} got to the office at {_clock(start + k + 10)}.",
                f"{a} got there {k} minutes after {b}.",
            ],
            "neutral": [
                f"{a} was the first person to arrive at the office.",
                f"{b} took the bus to the office.",
                f"{a} arrived at the office at {_clock(start)} and made coffee for everyone.",
            ],
        },
    )


def nli_r3_ages(rng):
    a = person(rng)
    b = person(rng, female=True)
    while b.name.split()[0] == a.name.split()[0]:
        b = person(rng, female=True)
    x, d = rng.randint(12, 40), rng.randint(2, 9)
    ctx = f"{a} is {x} years old. {a.His} sister {b} is {NUMWORDS[d]} years older."
    return (
        ctx,
        "wiki",
        {
            "entailed": [
                f"{b} is {x + d} years old.",
                f"{a} is younger than {b}.",
                f"{b} was born before {a}.",
            ],
            "contradictory": [
                f"{b} is younger than {a}.",
                f"{b} is {x - d} years old.",
                f"{a} is older than {a.his} sister.",
            ],
            "neutral": [
                f"{b} is married.",
                f"{a} and {b} live together.",
                f"{b} is {x + d} years old and works as a nurse.",
            ],
        },
    )


def nli_r3_race(rng):
    a, b, c = people(rng, 3)
    ctx = f"In the school race, {a} finished ahead of {b}, and {b} finished ahead of {c}."
    return (
        ctx,
        "fiction",
        {
            "entailed": [
                f"{a} finished ahead of {c}.",
                f"{c} finished behind {a}.",
                f"{c} did not beat {a}.",
            ],
            "contradictory": [
                f"{c} finished ahead of {a}.",
                f"{b} finished ahead of {a}.",
                f"{c} beat {b} in the school race.",
            ],
            "neutral": [
                f"{a} won the school race.",
                f"{c} finished last in the school race.",
                f"{b} finished second in the school race.",
            ],
        },
    )


def nli_r3_restaurant(rng):
    p = person(rng)
    y1 = rng.randint(1950, 1975)
    y2 = y1 + rng.randint(24, 35)
    k = rng.randint(3, 12)
    city = rng.choice(CITIES)
    ctx = (
        f"{p} was born in {y1}. {p.He} opened {p.his} first restaurant in {city} in {y2} "
        f"and sold it {NUMWORDS[k]} years later."
    )
    return (
        ctx,
        "wiki",
        {
            "entailed": [
                f"{p} sold the restaurant in {y2 + k}.",
                f"{p} owned the restaurant for {k} years.",
                f"{p} was over twenty when {p.he} opened the restaurant.",
            ],
            "contradictory": [
                f"{p} sold the restaurant in {y2 + k + 3}.",
                f"{p} opened {p.his} first restaurant in {city} in {y2 - 4}.",
                f"{p} still owns {p.his} first restaurant.",
            ],
            "neutral": [
                f"{p} opened a second restaurant in {y2 + k}.",
                f"The restaurant in {city} made a profit.",
                f"{p} sold the restaurant to {p.his} {relative(rng)}.",
            ],
        },
    )


def nli_r3_tickets(rng):
    p = person(rng)
    n, price = rng.randint(3, 6), rng.choice([12, 15, 20, 25, 30])
    rel = relative(rng)
    ctx = (
        f"{p} bought {NUMWORDS[n]} tickets at {price} dollars each. "
        f"{p.He} gave two of them to {p.his} {rel}."
    )
    return (
        ctx,
        "letters",
        {
            "entailed": [
                f"{p} paid {n * price} dollars in total.",
                f"{p}'s {rel} received two tickets.",
                f"{p} bought more than two tickets.",
            ],
            "contradictory": [
                f"{p} spent {n * price + price} dollars on tickets.",
                f"{p} bought {n} tickets at {price + 5} dollars each.",
                f"{p} gave all of the tickets to {p.his} {rel}.",
            ],
            "neutral": [
                f"{p} bought the tickets for a concert.",
                f"{p} bought {n} tickets at {price} dollars each online.",
                f"{p} went to the event with {p.his} {rel}.",
            ],
        },
    )


# ---- round 4: double negation, quantifiers, implicatives, dates, relations ----
def nli_r4_exam(rng):
    p = person(rng)
    subj = rng.choice(SUBJECTS_SCHOOL)
    ctx = (
        f"It is not true that {p} failed the {subj} exam. In fact, {p.he} got the second "
        f"highest score in {p.his} class."
    )
    return (
        ctx,
        "fiction",
        {
            "entailed": [
                f"{p} passed the {subj} exam.",
                f"Exactly one classmate outscored {p}.",
                f"{p} did not get the top score in {p.his} class.",
            ],
            "contradictory": [
                f"{p} failed the {subj} exam.",
                f"{p} got the highest score in {p.his} class.",
                f"Nobody in {p}'s class scored higher than {p.him}.",
            ],
            "neutral": [
                f"{p} studied all week for the {subj} exam.",
                f"{p} wants to study {subj} at university.",
                f"{p} got the second highest score in the whole school.",
            ],
        },
    )


def nli_r4_plants(rng):
    p = person(rng)
    single, plural = rng.choice(PLANTS)
    n = rng.randint(6, 15)
    ctx = (
        f"All but two of the {NUMWORDS[n]} {plural} that {p} planted last spring "
        "survived the winter."
    )
    return (
        ctx,
        "letters",
        {
            "entailed": [
                f"{n - 2} of {p}'s {plural} made it through the cold months.",
                f"Two of the {plural} died over the winter.",
                f"Not every {single} {p} planted survived.",
            ],
            "contradictory": [
                f"All {NUMWORDS[n]} of the {plural} survived the winter.",
                f"Only two of the {plural} survived the winter.",
                f"{p} planted the {plural} last autumn.",
            ],
            "neutral": [
                f"{p} planted the {plural} with {p.his} {relative(rng)}.",
                "The winter was unusually cold.",
                f"All but two of the {plural} that {p} planted last spring are flowering.",
            ],
        },
    )


def nli_r4_implicative(rng):
    p = person(rng)
    if rng.random() < 0.5:
        city = rng.choice(CITIES)
        ctx = (
            f"{p} managed to finish the marathon in {city}, although {p.he} had hurt "
            f"{p.his} knee a week earlier."
        )
        return (
            ctx,
            "news",
            {
                "entailed": [
                    f"{p} completed the race in {city}.",
                    f"{p} ran with an injury that was not new.",
                    f"{p} did not drop out of the marathon.",
                ],
                "contradictory": [
                    f"{p} dropped out of the marathon in {city}.",
                    f"{p} hurt {p.his} knee during the marathon.",
                    f"{p} tried to finish the marathon in {city} but could not.",
                ],
                "neutral": [
                    f"{p} finished the marathon in under four hours.",
                    f"{p} had run a marathon before.",
                    f"{p} managed to finish the marathon in {city} with {p.his} {relative(rng)}.",
                ],
            },
        )
    ctx = f"{p} forgot to lock the front door before leaving for work on {rng.choice(DAYS)}."
    return (
        ctx,
        "fiction",
        {
            "entailed": [
                "The front door was left unlocked.",
                f"{p} did not lock the front door.",
                f"{p} left the house for work.",
            ],
            "contradictory": [
                f"{p} locked the front door before leaving for work.",
                f"{p} remembered to lock the front door.",
                f"{p} stayed home from work all day.",
            ],
            "neutral": [
                f"Someone broke into {p}'s house.",
                f"{p} forgot to lock the front door because {p.he} was late.",
                f"{p} lives with {p.his} {relative(rng)}.",
            ],
        },
    )


def nli_r4_lease(rng):
    p = person(rng)
    i = rng.randrange(len(MONTHS_31))
    month = MONTHS_31[i]
    nxt = MONTHS[(MONTHS.index(month) + 1) % 12]
    d = rng.randint(1, 8)
    ctx = (
        f"The lease {p} signed on {month} {d} lasts exactly three weeks. "
        f"{p.He} plans to move out the day it ends."
    )
    return (
        ctx,
        "letters",
        {
            "entailed": [
                f"The lease ends on {month} {d + 21}.",
                "The lease is shorter than a month.",
                f"{p} plans to leave before {nxt}.",
            ],
            "contradictory": [
                f"The lease ends in {nxt}.",
                "The lease lasts longer than a month.",
                f"{p} signed the lease on {month} {d + 21}.",
            ],
            "neutral": [
                f"{p} is moving in with {p.his} {relative(rng)} afterwards.",
                "The rent is cheap.",
                f"The lease {p} signed on {month} {d} was for a flat in {rng.choice(CITIES)}.",
            ],
        },
    )


def nli_r4_vote(rng):
    a, b = people(rng, 2)
    k = rng.randint(5, 9)
    ctx = (
        f"Only {a} and {b} voted against the proposal; the other {NUMWORDS[k]} members of "
        "the committee voted for it."
    )
    return (
        ctx,
        "news",
        {
            "entailed": [
                f"The proposal got {k} votes in favor.",
                f"{b} opposed the proposal.",
                f"The committee has {k + 2} members.",
            ],
            "contradictory": [
                f"{a} voted for the proposal.",
                "The committee rejected the proposal.",
                f"{a}, {b} and one other member voted against the proposal.",
            ],
            "neutral": [
                f"{a} and {b} are close friends.",
                "The proposal was about building a new park.",
                f"{a} and {b} voted against the proposal because of its cost.",
            ],
        },
    )


def nli_r4_relation(rng):
    older_female = rng.random() < 0.5
    a = person(rng, female=older_female)
    b = person(rng, female=not older_female)
    while b.name.split()[0] == a.name.split()[0]:
        b = person(rng, female=not older_female)
    role = "aunt" if a.female else "uncle"
    inv = "niece" if b.female else "nephew"
    wrong = "niece" if a.female else "nephew"
    ctx = f"{a} is {b}'s {role}. {a.He} taught {b.him} to drive when {b.he} was seventeen."
    return (
        ctx,
        "fiction",
        {
            "entailed": [
                f"{b} learned to drive from a relative.",
                f"{b} is {a}'s {inv}.",
                f"Someone in {b}'s family taught {b.him} to drive.",
            ],
            "contradictory": [
                f"{b} taught {a} to drive.",
                f"{a} is {b}'s {wrong}.",
                f"{b} learned to drive from a driving school, not from family.",
            ],
            "neutral": [
                f"{b} passed {b.his} driving test on the first try.",
                f"{a} is {b}'s favorite {role}.",
                f"{a} taught {b} to drive in {a.his} old car.",
            ],
        },
    )


def nli_r4_secret(rng):
    p = person(rng)
    rel = relative(rng)
    ctx = (
        f"{p} never told {p.his} {rel} about the accident, so {p.his} {rel} still believes "
        "the car was stolen."
    )
    return (
        ctx,
        "fiction",
        {
            "entailed": [
                f"{p.His} {rel} does not know about the accident.",
                f"{p} kept the accident a secret from {p.his} {rel}.",
                f"{p}'s {rel} thinks someone took the car.",
            ],
            "contradictory": [
                f"{p} told {p.his} {rel} about the accident.",
                f"{p.His} {rel} knows the car was in an accident.",
                f"{p}'s {rel} no longer believes the car was stolen.",
            ],
            "neutral": [
                f"{p} was driving the car when the accident happened.",
                "The accident happened last winter.",
                f"{p} never told {p.his} {rel} about the speeding ticket either.",
            ],
        },
    )


NLI_FAMILIES: dict[str, list[NLIFamily]] = {
    "r1": [nli_r1_purchase, nli_r1_job, nli_r1_trip, nli_r1_event, nli_r1_pet, nli_r1_cook],
    "r2": [nli_r2_match, nli_r2_flight, nli_r2_life, nli_r2_bakery, nli_r2_election, nli_r2_novel],
    "r3": [
        nli_r3_goals,
        nli_r3_arrival,
        nli_r3_ages,
        nli_r3_race,
        nli_r3_restaurant,
        nli_r3_tickets,
    ],
    "r4": [
        nli_r4_exam,
        nli_r4_plants,
        nli_r4_implicative,
        nli_r4_lease,
        nli_r4_vote,
        nli_r4_relation,
        nli_r4_secret,
    ],
}


def build_nli(round_name: str, rng: random.Random) -> list[dict]:
    families = NLI_FAMILIES[round_name]

    def maker(fam: NLIFamily, label: str) -> Callable[[random.Random], dict]:
        def make(rng: random.Random) -> dict:
            ctx, genre, hyps = fam(rng)
            return {"context": ctx, "hypothesis": rng.choice(hyps[label]), "genre": genre}

        return make

    makers = {
        lab: [maker(f, lab) for f in families] for lab in ("entailed", "neutral", "contradictory")
    }
    rows = pick_balanced(
        rng, makers, ROWS_PER_FILE, key=lambda r: r["context"] + "|" + r["hypothesis"]
    )
    return [
        {
            "context": r["context"],
            "hypothesis": r["hypothesis"],
            "label": r["label"],
            "genre": r["genre"],
        }
        for r in rows
    ]


# --------------------------------------------------------------------------------------
# QA
# --------------------------------------------------------------------------------------
CO_A = [
    "Brightwater",
    "Redfern",
    "Oakhollow",
    "Silverline",
    "Northgate",
    "Bluepine",
    "Copperfield",
    "Westbrook",
    "Stonebridge",
    "Larkspur",
    "Halloway",
    "Kingsmere",
]
CO_B = ["Mills", "Tools", "Foods", "Textiles", "Robotics", "Ceramics", "Bicycles", "Press"]
PRODUCTS = [
    "wool blankets",
    "garden tools",
    "canned soup",
    "ceramic tiles",
    "folding bicycles",
    "school notebooks",
    "solar lamps",
    "wooden toys",
    "hiking boots",
    "paper lanterns",
]
PRODUCTS_FORMER = ["clocks", "barrels", "horse saddles", "sewing machines", "radios", "rope"]
RACES = [
    "Harbor Marathon",
    "Coastal Half Marathon",
    "Valley Ten Miler",
    "Ridge Trail Race",
    "Lakeshore 10K",
    "Old Town Relay",
]
PLACES_NATURE = [
    "Corran Valley",
    "Mistral Hills",
    "Sable Marshes",
    "Ardent Forest",
    "Pellow Caves",
    "Tarnish Plateau",
]
SPECIES = ["frog", "beetle", "moth", "salamander", "orchid", "bat", "snail"]
ALBUMS = [
    "Paper Harbor",
    "Slow Lanterns",
    "Northern Static",
    "Glass Orchard",
    "Quiet Engines",
    "Salt and Ember",
    "Blue Kitchen",
    "Midnight Ferry",
]
SONGS = [
    "Rain on Tin",
    "Second Street",
    "Lighthouse Waltz",
    "Borrowed Coat",
    "Crooked Mile",
    "Summer Fever",
    "Two Rivers",
]
RIVERS = ["Ashby", "Thorne", "Wendle", "Calder", "Meriden", "Oxlow"]
LAKES = ["Lake Imber", "Lake Corvale", "Lake Tannis", "Lake Ovrin", "Lake Sellet"]
REGIONS = [
    "the northern province",
    "the Dunmore district",
    "the high valley region",
    "the eastern county",
]
FESTIVALS = [
    "Lantern Festival",
    "Harvest Fair",
    "Kite Festival",
    "Street Music Week",
    "Winter Market",
    "Cheese and Cider Fair",
]
DISCOVERIES = [
    "a new antibiotic in pond mud",
    "a faster way to purify water",
    "a protein that slows tooth decay",
    "a crystal that glows under pressure",
    "a fungus that eats plastic",
]
FIELDS = [
    "coral reefs",
    "bird migration",
    "soil bacteria",
    "volcanic rock",
    "glacier ice",
    "bee colonies",
]
PRIZES = ["Halvorsen Prize", "Meridian Medal", "Calder Award", "Lumen Prize"]
JOBS2 = [
    "carpenter",
    "lawyer",
    "baker",
    "pilot",
    "architect",
    "fisherman",
    "engineer",
    "painter",
    "doctor",
    "journalist",
]

QAFamily = Callable[[random.Random], tuple[str, str, list[tuple[str, str]]]]


def _time(rng: random.Random) -> str:
    return f"{rng.randint(2, 3)} hours {rng.randint(1, 59)} minutes"


# ---- round 1: the question reuses the words around the answer ----
def qa_r1_company(rng):
    p = person(rng)
    co = f"{rng.choice(CO_A)} {rng.choice(CO_B)}"
    year, town, job = rng.randint(1890, 2005), rng.choice(TOWNS), rng.choice(JOBS2)
    product, n = rng.choice(PRODUCTS), rng.choice([40, 85, 120, 300, 650, 1200])
    rel = relative(rng)
    ctx = (
        f"{co} was founded in {year} by {p}, {an('former ' + job)} from {town}. The company makes "
        f"{product} and employs about {n} people. {p.He} still runs it with {p.his} {rel}."
    )
    return (
        ctx,
        "business",
        [
            (f"In what year did {p} found {co}?", str(year)),
            (f"What does the company founded by {p} make?", product),
            (f"Where was {p} from?", town),
            (f"How many people does {p}'s company employ?", str(n)),
            (f"Who does {p} still run {co} with?", f"{p.his} {rel}"),
            (f"What was {p}'s job before {p.he} founded {co}?", job),
        ],
    )


def qa_r1_runner(rng):
    p, p2, coach = people(rng, 3)
    race, city, year = rng.choice(RACES), rng.choice(CITIES), rng.randint(1998, 2023)
    t, k = _time(rng), rng.randint(2, 12)
    ctx = (
        f"{p} won the {race} in {city} in {year}. {p.He} finished in {t}, almost a minute "
        f"ahead of {p2}. {p.His} coach, {coach}, had trained {p.him} for {NUMWORDS[k]} years."
    )
    return (
        ctx,
        "sports",
        [
            (f"What race did {p} win in {year}?", race),
            (f"In which city did {p} win the {race}?", city),
            (f"Who was {p}'s coach?", str(coach)),
            (f"What was {p}'s finishing time in the {race}?", t),
            (f"For how many years had {coach} trained {p}?", NUMWORDS[k]),
            (f"Who finished almost a minute behind {p}?", str(p2)),
        ],
    )


def qa_r1_scientist(rng):
    p = person(rng)
    last = p.name.split()[-1]
    species, place, year, rel = (
        rng.choice(SPECIES),
        rng.choice(PLACES_NATURE),
        rng.randint(1960, 2022),
        relative(rng),
    )
    ctx = (
        f"Dr. {p} discovered a new species of {species} in the {place} in {year}. "
        f"{p.He} named it after {p.his} {rel}, who had first taken {p.him} hiking there."
    )
    return (
        ctx,
        "science",
        [
            (f"What did Dr. {last} discover in {year}?", f"a new species of {species}"),
            (f"Where did Dr. {p} find the new {species}?", f"the {place}"),
            (f"Who did Dr. {p} name the new {species} after?", f"{p.his} {rel}"),
            (f"In what year did Dr. {p} discover the new species?", str(year)),
        ],
    )


def qa_r1_musician(rng):
    p = person(rng)
    album, song, year, town = (
        rng.choice(ALBUMS),
        rng.choice(SONGS),
        rng.randint(1965, 2021),
        rng.choice(TOWNS),
    )
    k = rng.randint(2, 9)
    ctx = (
        f"{p} released {p.his} first album, {album}, in {year}. It was recorded in a barn "
        f"near {town} over {NUMWORDS[k]} weeks. The album's best-known song is {song}."
    )
    return (
        ctx,
        "arts",
        [
            (f"What was the name of {p}'s first album?", album),
            (f"Where was {p}'s first album recorded?", f"a barn near {town}"),
            (f"When did {p} release {p.his} first album?", str(year)),
            (f"What is the best-known song on {p}'s first album?", song),
            (f"How many weeks did {p} spend recording {album}?", NUMWORDS[k]),
        ],
    )


def qa_r1_village(rng):
    p = person(rng)
    last = rng.choice(SURNAMES)
    t = p.title
    town, river, year, k = (
        rng.choice(TOWNS),
        rng.choice(RIVERS),
        rng.randint(1820, 1910),
        rng.randint(5, 40),
    )
    ctx = (
        f"The village of {town} grew up around a mill on the {river} River. In {year}, "
        f"{t} {last} opened the first school there, and {p.he} taught in it for {k} years."
    )
    return (
        ctx,
        "history",
        [
            (f"What did {t} {last} open in {year}?", "the first school"),
            (f"When did {t} {last} open the first school in {town}?", str(year)),
            (f"How long did {t} {last} teach at the school?", f"{k} years"),
            (f"On which river was the mill in {t} {last}'s village?", f"the {river} River"),
        ],
    )


def qa_r1_lake(rng):
    p = person(rng)
    lake, region, month, town = (
        rng.choice(LAKES),
        rng.choice(REGIONS),
        rng.choice(MONTHS),
        rng.choice(TOWNS),
    )
    k = rng.choice([6, 9, 12, 15, 22, 30])
    ctx = (
        f"{lake} is the largest lake in {region}. Ranger {p} says the best time to visit is "
        f"in {month}, when the water is calm. The nearest town, {town}, is {k} kilometers to "
        f"the north, and {p.he} lives there with {p.his} {relative(rng)}."
    )
    return (
        ctx,
        "geography",
        [
            (f"According to ranger {p}, when is the best time to visit {lake}?", month),
            (f"Which town does ranger {p} live in?", town),
            (f"How far is the town where {p} lives from {lake}?", f"{k} kilometers"),
            (f"What is {lake} the largest lake in, according to the ranger {p}?", region),
        ],
    )


# ---- round 2: distractor spans of the same type, paraphrased questions ----
def qa_r2_succession(rng):
    p1 = person(rng)
    p2, p3 = people(rng, 2)
    while p2.name.split()[0] == p1.name.split()[0] or p3.name.split()[0] == p1.name.split()[0]:
        p2, p3 = people(rng, 2)
    co = f"{rng.choice(CO_A)} {rng.choice(CO_B)}"
    y1 = rng.randint(1900, 1960)
    y2 = y1 + rng.randint(15, 30)
    ta, tb = rng.sample(TOWNS, 2)
    old, new = rng.choice(PRODUCTS_FORMER), rng.choice(PRODUCTS)
    ctx = (
        f"{p1} started {co} in {y1} as a small workshop making {old} in {ta}. In {y2}, {p1.he} "
        f"handed the business to {p1.his} {p2.child}, {p2}, who moved the headquarters to "
        f"{tb} and switched to making {new}. {p2.He} later hired {p3} as chief engineer."
    )
    return (
        ctx,
        "business",
        [
            (f"Who took charge of the business after {p1} stepped down?", str(p2)),
            (f"What did {p1}'s company make in its early years?", old),
            (f"In which year did {p2} take control of {co}?", str(y2)),
            (f"Who became chief engineer under the founder's {p2.child}?", str(p3)),
            (f"Where is the company run by {p1}'s {p2.child} based?", tb),
            (f"In what town did {p1} first set up shop?", ta),
            (f"What does {co} produce since {p2} took over?", new),
        ],
    )


def qa_r2_race(rng):
    p1, p2, p3 = people(rng, 3)
    race, year = rng.choice(RACES), rng.randint(2005, 2023)
    t1, t2 = _time(rng), _time(rng)
    while t2 == t1:
        t2 = _time(rng)
    ctx = (
        f"In the {year} {race}, {p1} led for most of the course, but {p2} passed {p1.him} "
        f"two kilometers from the finish and won in {t1}. {p1} finished second in {t2}, and "
        f"{p3}, last year's winner, came third."
    )
    return (
        ctx,
        "sports",
        [
            (f"Who had won the race the year before {p2}'s victory?", str(p3)),
            (f"How long did it take {p1} to complete the course?", t2),
            (f"What was {p2}'s time when {p2.he} crossed the line first?", t1),
            (f"Which runner was ahead of {p2} for most of the race?", str(p1)),
            (f"How far from the end did {p2} overtake the leader?", "two kilometers"),
            (f"Where did the defending champion {p3} place?", "third"),
        ],
    )


def qa_r2_biography(rng):
    p1 = person(rng)
    p2 = person(rng)
    while p2.name.split()[0] == p1.name.split()[0]:
        p2 = person(rng)
    ta, tb = rng.sample(TOWNS, 2)
    y1 = rng.randint(1880, 1940)
    y2 = y1 + rng.randint(19, 30)
    y3 = y2 + rng.randint(20, 45)
    j1, j2 = rng.sample(JOBS2, 2)
    k = rng.randint(3, 9)
    ctx = (
        f"{p1} was born in {ta} in {y1}, the youngest of {NUMWORDS[k]} children. "
        f"{p1.His} older {p2.sib}, {p2}, became {an(j2)}, while {p1} trained as {an(j1)} and "
        f"moved to {tb} in {y2}. {p1} died there in {y3}."
    )
    return (
        ctx,
        "history",
        [
            (f"What was {p1}'s profession?", j1),
            (f"Where did {p1} spend the final years of {p1.his} life?", tb),
            (f"In what year was {p2}'s youngest sibling born?", str(y1)),
            (f"How many children did {p1}'s parents have?", NUMWORDS[k]),
            (f"What did {p1}'s {p2.sib} do for a living?", j2),
            (f"When did {p1} leave {p1.his} home town?", str(y2)),
            (f"In which year did {p1} die?", str(y3)),
        ],
    )


def qa_r2_festival(rng):
    p1, p2 = people(rng, 2)
    fest, town = rng.choice(FESTIVALS), rng.choice(TOWNS)
    y1 = rng.randint(1950, 1990)
    y2 = y1 + rng.randint(10, 25)
    month = rng.choice(MONTHS)
    d1 = rng.randint(3, 15)
    d2 = d1 + rng.randint(2, 6)
    n = rng.choice(["8,000", "12,000", "15,500", "20,000", "31,000"])
    ctx = (
        f"The {fest} in {town} was first held in {y1}. {p1} organized it until {y2}, when "
        f"{p2} took over. This year it runs from {month} {d1} to {month} {d2}, and {p2.he} "
        f"expects {n} visitors, twice as many as last year."
    )
    return (
        ctx,
        "events",
        [
            (f"Who was in charge of the {fest} before {p2}?", str(p1)),
            (f"Since what year has {p2} been running the festival?", str(y2)),
            (f"How many people does {p2} think will come this year?", n),
            (f"On what date does {p2}'s festival close this year?", f"{month} {d2}"),
            (f"When did {p1}'s festival take place for the very first time?", str(y1)),
            (f"On what date does this year's festival open, according to {p2}?", f"{month} {d1}"),
        ],
    )


def qa_r2_lab(rng):
    p1, p2, p3 = people(rng, 3)
    city, field, disc = rng.choice(CITIES), rng.choice(FIELDS), rng.choice(DISCOVERIES)
    year, prize = rng.randint(1975, 2020), rng.choice(PRIZES)
    ctx = (
        f"Dr. {p1} and Dr. {p2} worked in the same laboratory in {city}. {p1} studied "
        f"{field}, but it was {p2} who found {disc} in {year}. {p2.He} shared the {prize} "
        f"with {p1}'s former student, {p3}."
    )
    return (
        ctx,
        "science",
        [
            (f"Whose research at the lab focused on {field}, {p2}'s or a colleague's?", str(p1)),
            (f"With whom did {p2} share the {prize}?", str(p3)),
            (f"What was {p1}'s area of research?", field),
            (f"In which year did {p2} make {p2.his} discovery?", str(year)),
            (f"What did Dr. {p2} discover?", disc),
            (f"Who supervised {p3} as a student?", str(p1)),
        ],
    )


QA_FAMILIES: dict[str, list[QAFamily]] = {
    "r1": [qa_r1_company, qa_r1_runner, qa_r1_scientist, qa_r1_musician, qa_r1_village, qa_r1_lake],
    "r2": [qa_r2_succession, qa_r2_race, qa_r2_biography, qa_r2_festival, qa_r2_lab],
}


def build_qa(round_name: str, rng: random.Random) -> list[dict]:
    families = QA_FAMILIES[round_name]

    def maker(fam: QAFamily) -> Callable[[random.Random], dict]:
        def make(rng: random.Random) -> dict:
            ctx, topic, qas = fam(rng)
            q, a = rng.choice(qas)
            start = ctx.find(a)
            if start < 0:
                raise AssertionError(f"answer {a!r} not in context {ctx!r}")
            return {
                "context": ctx,
                "question": q,
                "answer": a,
                "answer_start": start,
                "topic": topic,
            }

        return make

    rows = pick_balanced(
        rng,
        {"qa": [maker(f) for f in families]},
        ROWS_PER_FILE,
        key=lambda r: r["context"] + "|" + r["question"],
    )
    return [
        {
            "context": r["context"],
            "question": r["question"],
            "answer": r["answer"],
            "answer_start": r["answer_start"],
            "topic": r["topic"],
        }
        for r in rows
    ]


# --------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------
TASKS: dict[str, tuple[list[str], Callable[[str, random.Random], list[dict]]]] = {
    "nli": (["r1", "r2", "r3", "r4"], build_nli),
    "qa": (["r1", "r2"], build_qa),
    "sentiment": (["r1", "r2", "r3"], build_sentiment),
    "hate_speech": (["r1", "r2", "r3", "r4"], build_hate_speech),
}


def render(task: str, round_name: str) -> str:
    builder = TASKS[task][1]
    rng = random.Random(SEED + zlib.crc32(f"{task}/{round_name}".encode()))
    lines = []
    for i, row in enumerate(builder(round_name, rng), start=1):
        lines.append(json.dumps({"uid": f"{task}-{round_name}-{i:03d}", **row}, ensure_ascii=True))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if any file differs from what would be built",
    )
    args = parser.parse_args(argv)
    stale = []
    for task, (rounds, _) in TASKS.items():
        for rnd in rounds:
            path = OUT_DIR / task / f"{rnd}.jsonl"
            text = render(task, rnd)
            if args.check:
                if not path.exists() or path.read_text(encoding="utf-8") != text:
                    stale.append(str(path))
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
            print(f"wrote {path.relative_to(OUT_DIR)} ({text.count(chr(10))} rows)")
    if stale:
        print("out of date:", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
