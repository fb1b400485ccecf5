"""Deterministic training data for the ``sentiment`` LoRA adapter (review -> "positive" / "negative").

Writes (paths relative to the repository root):

* ``adapters/sentiment/data/train.jsonl``          -- N_TRAIN generated reviews, balanced labels, in the
  benchmark's row format (id, instruction, input, expected_output, plus tags naming domain and phenomenon)
* ``adapters/sentiment/data/dev.jsonl``            -- DEV_REVIEWS: hand-written hard reviews for tuning
  (``evaluate_quick.py``), so that knobs are not chosen on the benchmark; never trained on
* ``adapters/sentiment/data/replay_prompts.jsonl`` -- date-iso's replay prompts (read, never written there)
  less its sentiment-labelling ones: their answers are the base model's ("The review is positive."), and
  replaying them would pull the adapter back towards exactly the behaviour it is trained out of

The reviews are composed from hand-written, per-domain phrase pools (films, gadgets, restaurants, hotels,
books, apps, flights, concerts, gyms, courses, games, salons, deliveries, holiday rentals) through templates
for the phenomena a small model gets wrong: mixed reviews whose verdict comes last, negated praise and
negated complaints, double negation, sarcasm ("Loved spending two hours on hold.") next to sincere praise in
the same words, understatement / surprise, very short and long reviews, plus hand-written hard sentences.
Every noun is praised in some clauses and criticised in others (``MIRRORS``), and negations occur on both
sides, so neither is a label cue by itself. The label is fixed by the template, never by a model.

The phenomena were chosen knowing which kinds of benchmark review the base model gets wrong (it answers
with a sentence or echoes the review, and misreads negation, understatement, sarcasm and mixed reviews);
no benchmark text was used, and the checks below keep every row away from the benchmark's wording.

Held out from ``benchmarks/sentiment.jsonl``: a generated row that equals a benchmark input, contains one,
shares a run of 5 words with one, or shares over half its word set with one is dropped (and counted), and
the script refuses to write anything unless the plugin's own ``held_out`` gate passes on the result.

Pure standard library (plus the plugin's gate for the final check), seeded ``random.Random`` streams only:
running the script twice gives byte-identical files.

Usage (from the repository root): ``python adapters/sentiment/make_data.py``
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DATA_DIR = HERE / "data"
BENCHMARK = ROOT / "benchmarks" / "sentiment.jsonl"
DATE_ISO_REPLAY = ROOT / "adapters" / "date-iso" / "data" / "replay_prompts.jsonl"

SEED_TRAIN = 5150
N_TRAIN = 800
LABELS = ("positive", "negative")
INSTRUCTION = "Classify the sentiment of the review as positive or negative. Reply with one word."
# Mostly the benchmark's wording; a few paraphrases so the adapter keys on the review, not one string.
INSTRUCTION_PARAPHRASES = (
    "Is the following review positive or negative? Answer with one word.",
    "Label the sentiment of this review: positive or negative. One word only.",
    "Decide whether the review below is positive or negative. Reply with a single word.",
)
P_PARAPHRASE = 0.15
LABEL_RE = re.compile(r"(?i)\b(positive|negative)\b")  # the benchmark's extract pattern

# Share of each phenomenon among the generated rows (each one is balanced between the labels).
KIND_WEIGHTS: dict[str, int] = {
    "plain": 20,
    "mixed": 22,
    "negation": 18,
    "double-negation": 8,
    "sarcasm": 10,
    "expectation": 12,
    "short": 4,
    "long": 6,
    "hard": 20,
    "loved-doing": 10,
}


# --------------------------------------------------------------------------------------------------------
# Phrase pools
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Domain:
    """What reviews of one kind of thing say. Clauses start lowercase and carry no final period."""

    name: str
    pos: tuple[str, ...]  # praise
    neg: tuple[str, ...]  # complaints
    aspects: tuple[str, ...]  # nouns for "the X" in negation templates
    pos_verdict: tuple[str, ...]  # closing sentences that settle a review as positive
    neg_verdict: tuple[str, ...]
    bad_things: tuple[str, ...]  # noun phrases that sarcasm pretends to praise
    low_hopes: tuple[str, ...]  # "I expected little from X" (positive surprise)
    high_hopes: tuple[str, ...]  # "I expected a lot from X" (disappointment)


DOMAINS: tuple[Domain, ...] = (
    Domain(
        "film",
        pos=(
            "the performances are superb", "the script is sharp and often very funny",
            "the cinematography is stunning", "the soundtrack stayed with me for days",
            "every scene earns its place", "the lead gives the best performance of her career",
            "the pacing never sags", "the final twist is genuinely clever",
        ),
        neg=(
            "the plot has more holes than a sieve", "the dialogue is stiff and clumsy",
            "the pacing is glacial", "the jokes land with a thud", "the special effects look cheap",
            "the ending is rushed and muddled", "the lead is badly miscast", "the middle hour drags terribly",
        ),
        aspects=("acting", "script", "soundtrack", "story", "ending"),
        pos_verdict=("I'd happily watch it again", "Go and see it on the big screen",
                     "A real treat from start to finish", "Easily my film of the year"),
        neg_verdict=("I nearly walked out", "Skip it and save the ticket money",
                     "A tedious evening at the cinema", "I regret buying the ticket"),
        bad_things=("three hours of characters staring out of windows", "a plot I guessed from the trailer",
                    "a villain who explains his whole plan twice", "a sequel that copies the original shot "
                    "for shot"),
        low_hopes=("a musical about a lighthouse keeper", "a black-and-white drama with subtitles",
                   "yet another superhero origin story", "a cartoon my niece picked"),
        high_hopes=("the director's long-awaited comeback", "the sequel everyone was raving about",
                    "a film with that cast"),
    ),
    Domain(
        "headphones",
        pos=(
            "the sound is rich and detailed", "the noise cancelling works wonders on the train",
            "they stay comfortable for hours", "the battery easily lasts a week of commuting",
            "pairing with my phone took seconds", "the case is small enough for a pocket",
        ),
        neg=(
            "the left earbud keeps disconnecting", "the bass is muddy and boomy",
            "they pinch my ears after twenty minutes", "the battery is flat by lunchtime",
            "the touch controls trigger at random", "the microphone makes me sound like I'm underwater",
        ),
        aspects=("sound", "battery", "fit", "noise cancelling"),
        pos_verdict=("Worth every penny", "I'd buy them again without thinking", "Best purchase this year"),
        neg_verdict=("They're going back", "Save your money", "I regret buying them"),
        bad_things=("earbuds that die after an hour", "a charging case that forgets to charge",
                    "noise cancelling that cancels nothing"),
        low_hopes=("a pair of budget earbuds", "a brand I'd never heard of"),
        high_hopes=("the most expensive pair in the shop", "a pair every reviewer loved"),
    ),
    Domain(
        "kitchen",
        pos=(
            "the coffee machine heats up in under a minute", "the pan is truly non-stick",
            "the toaster browns both sides evenly", "the knives are still razor sharp after months",
            "the mixer handles heavy dough without complaint", "cleaning it takes seconds",
        ),
        neg=(
            "the kettle leaks from the base", "the toaster burns one side and leaves the other raw",
            "the non-stick coating peeled within a month", "the lid doesn't close properly",
            "the motor smells of burning plastic", "the handle got too hot to hold",
        ),
        aspects=("coffee machine", "toaster", "frying pan", "mixer"),
        pos_verdict=("It has earned its spot on the counter", "I'd buy it again", "Money well spent"),
        neg_verdict=("Back in the box it goes", "Don't bother", "I want a refund"),
        bad_things=("a kettle that leaks all over the worktop", "a pan that welds eggs to its surface",
                    "a toaster with one setting: charcoal"),
        low_hopes=("a supermarket own-brand toaster", "a frying pan this cheap"),
        high_hopes=("a coffee machine at that price", "the brand my chef friend swears by"),
    ),
    Domain(
        "phone",
        pos=(
            "the screen is bright even in direct sun", "the battery gets me through two full days",
            "the photos come out sharp and natural", "it's fast and never stutters",
            "the updates arrive like clockwork", "it feels solid in the hand",
        ),
        neg=(
            "it overheats during a simple video call", "the screen cracked from a small drop",
            "the battery drains overnight for no reason", "the camera blurs anything that moves",
            "it freezes several times a day", "the speaker crackles at half volume",
        ),
        aspects=("battery", "camera", "screen", "software"),
        pos_verdict=("Best phone I've owned", "I'd recommend it to anyone", "Very glad I switched"),
        neg_verdict=("I'm returning it", "Buy something else", "Worst phone I've owned"),
        bad_things=("a phone that reboots itself during calls", "a battery that lasts until breakfast",
                    "a camera that makes every photo look like a watercolour"),
        low_hopes=("a mid-range phone", "a refurbished phone"),
        high_hopes=("the flagship model", "a phone with that price tag"),
    ),
    Domain(
        "restaurant",
        pos=(
            "the risotto was creamy and full of flavour", "our waiter remembered every detail of the order",
            "the desserts are worth the trip alone", "the bread is baked fresh every morning",
            "the tasting menu was beautifully balanced", "the portions are generous and the prices fair",
            "the terrace has a lovely view over the harbour",
        ),
        neg=(
            "the steak arrived grey and chewy", "the staff ignored us for twenty minutes",
            "the curry tasted of nothing but salt", "the table wobbled and the cutlery was dirty",
            "the bill included drinks we never ordered", "the music was so loud we had to shout",
            "the chips were limp and cold",
        ),
        aspects=("food", "service", "desserts", "menu"),
        pos_verdict=("We'll definitely be back", "Book a table, you won't regret it", "A gem of a place"),
        neg_verdict=("We won't be going back", "Eat anywhere else", "Not worth the money"),
        bad_things=("an hour-long wait for a lukewarm burger", "soup served with a hair in it",
                    "a bill with a surprise service charge"),
        low_hopes=("a cafe attached to a petrol station", "a place with plastic menus",
                   "a food truck in a car park"),
        high_hopes=("the most talked-about restaurant in town", "a place with a waiting list of months"),
    ),
    Domain(
        "hotel",
        pos=(
            "the room was spotless and quiet", "the receptionist found us a table at a fully booked "
            "restaurant", "the breakfast spread was enormous", "the spa was calm and beautifully kept",
            "the bed was like sleeping on a cloud", "the view from the balcony was breathtaking",
        ),
        neg=(
            "the carpet was sticky and stained", "the shower dribbled lukewarm water",
            "the staff lost our booking twice", "the radiator clanked all night",
            "the pool was closed for the whole week", "we could hear every word from the next room",
        ),
        aspects=("room", "staff", "breakfast", "location"),
        pos_verdict=("We'll be booking again next year", "Couldn't recommend it more", "A wonderful stay"),
        neg_verdict=("We checked out a day early", "Stay somewhere else", "Never again"),
        bad_things=("a 'sea view' of the bins", "sheets that hadn't been changed", "a shower that runs "
                    "cold after a minute"),
        low_hopes=("a roadside motel", "a hotel that cheap", "a room booked last minute"),
        high_hopes=("a five-star resort", "the hotel from all those travel magazines"),
    ),
    Domain(
        "book",
        pos=(
            "the characters feel like real people", "the prose is elegant without showing off",
            "I read the last hundred pages in one sitting", "the mystery kept me guessing to the end",
            "the historical detail is fascinating", "the ending made me cry in a good way",
        ),
        neg=(
            "the characters are paper thin", "the plot meanders and goes nowhere",
            "the twist is obvious from chapter two", "the writing is full of clichés",
            "the last third feels rushed", "the translation is clumsy and stiff",
        ),
        aspects=("characters", "plot", "writing", "ending"),
        pos_verdict=("I've already bought the sequel", "A book I'll keep rereading", "Read it"),
        neg_verdict=("I gave up halfway", "Leave it on the shelf", "A chore to finish"),
        bad_things=("four hundred pages in which nothing happens",
                    "a detective who solves everything by luck"),
        low_hopes=("a fantasy novel aimed at teenagers", "a book about the history of salt"),
        high_hopes=("this year's prize winner", "the author of my favourite trilogy"),
    ),
    Domain(
        "app",
        pos=(
            "the interface is clean and intuitive", "syncing between my devices is instant",
            "it has never crashed on me", "the reminders have genuinely changed my habits",
            "the support team answered within an hour", "it runs smoothly even on my old tablet",
        ),
        neg=(
            "it logs me out every other day", "the adverts cover half the screen",
            "the latest update wiped my settings", "it drains my battery in the background",
            "support never answers emails", "half the features sit behind a paywall",
        ),
        aspects=("app", "update", "interface", "subscription"),
        pos_verdict=("Worth the subscription", "Five stars", "I use it every day"),
        neg_verdict=("Uninstalled", "Look for another app", "One star is generous"),
        bad_things=("an update that deletes your saved work", "a 'free' app that asks for money every "
                    "minute"),
        low_hopes=("a free budgeting app", "yet another to-do list app"),
        high_hopes=("the app everyone at work recommended", "a premium subscription"),
    ),
    Domain(
        "flight",
        pos=(
            "boarding was quick and orderly", "the cabin crew were warm and attentive",
            "the seats had proper legroom", "we landed half an hour early",
            "the meal was surprisingly tasty", "our bags were the first off the belt",
        ),
        neg=(
            "the flight was cancelled with no explanation", "the crew were short-tempered",
            "my knees were pressed against the seat in front", "they lost my suitcase",
            "we sat on the runway for two hours", "the toilets were out of order",
        ),
        aspects=("flight", "crew", "seats", "airline"),
        pos_verdict=("I'll fly with them again", "Top airline", "A pleasure to fly with"),
        neg_verdict=("Never flying with them again", "Choose another airline", "What a shambles"),
        bad_things=("a four-hour delay with one free bottle of water", "a window seat with no window"),
        low_hopes=("a budget airline", "the cheapest ticket on the site"),
        high_hopes=("a business class ticket", "an award-winning airline"),
    ),
    Domain(
        "concert",
        pos=(
            "the band sounded even better than on record", "the light show was spectacular",
            "the crowd sang along to every chorus", "the acoustics in the hall were flawless",
            "they played for nearly three hours", "the support act was a wonderful discovery",
        ),
        neg=(
            "the sound was a muddy mess", "the singer seemed bored and barely spoke",
            "the set lasted barely forty minutes", "the queue for the bar took half the show",
            "we could hardly see the stage", "the tickets cost a fortune",
        ),
        aspects=("sound", "setlist", "venue", "show"),
        pos_verdict=("Best gig I've been to", "I'd see them again tomorrow", "A night to remember"),
        neg_verdict=("I want my money back", "I left early", "A night to forget"),
        bad_things=("paying ninety pounds to watch a screen", "a two-song encore of the same song"),
        low_hopes=("a tribute band", "a free gig in the park"),
        high_hopes=("my favourite band's reunion tour", "a sold-out stadium show"),
    ),
    Domain(
        "gym",
        pos=(
            "the equipment is modern and well maintained", "the trainers take time to correct your form",
            "the changing rooms are spotless", "it's never too busy, even in the evening",
            "the classes are varied and fun",
        ),
        neg=(
            "half the machines are broken", "the showers are freezing",
            "it's so crowded you queue for every bench", "the staff spend the day on their phones",
            "they charged me after I cancelled",
        ),
        aspects=("equipment", "classes", "staff", "membership"),
        pos_verdict=("Best membership I've had", "Worth joining", "I actually look forward to going"),
        neg_verdict=("I've cancelled my membership", "Join somewhere else", "A rip-off"),
        bad_things=("a membership you can only cancel by letter", "a sauna that's always out of order"),
        low_hopes=("a budget gym", "the gym above the supermarket"),
        high_hopes=("a premium health club", "the gym with all those adverts"),
    ),
    Domain(
        "course",
        pos=(
            "the lessons build on each other logically", "the teacher explains hard ideas simply",
            "the exercises are challenging but fair", "I can already hold a basic conversation",
            "the feedback on assignments was detailed",
        ),
        neg=(
            "the videos are outdated and blurry", "the quizzes test things never covered",
            "the tutor never replied to questions", "the certificate is worthless",
            "the material is copied straight from free websites",
        ),
        aspects=("course", "teacher", "material", "exercises"),
        pos_verdict=("I've signed up for the next level", "Highly recommended", "I learned a lot"),
        neg_verdict=("I asked for a refund", "Learn it from books instead", "A waste of time"),
        bad_things=("a coding course whose examples don't run", "forty hours of someone reading slides"),
        low_hopes=("a free online course", "a night class at the library"),
        high_hopes=("a course with that price", "a course from a famous university"),
    ),
    Domain(
        "game",
        pos=(
            "the levels are inventive and full of secrets", "the controls feel tight and responsive",
            "the soundtrack is gorgeous", "the story had me hooked for forty hours",
            "the online matches are fair and fun",
        ),
        neg=(
            "it crashes every time I load a save", "the story is forgettable",
            "the servers are down every weekend", "everything worth having costs real money",
            "the frame rate drops constantly",
        ),
        aspects=("game", "controls", "story", "multiplayer"),
        pos_verdict=("Game of the year for me", "Buy it", "I can't stop playing"),
        neg_verdict=("Refunded after two hours", "Wait for a sale, or better, skip it", "A broken mess"),
        bad_things=("a loading screen longer than the levels", "paying extra to unlock the ending"),
        low_hopes=("a small indie puzzle game", "a game made by two people"),
        high_hopes=("the biggest release of the year", "a sequel to my favourite game"),
    ),
    Domain(
        "salon",
        pos=(
            "the stylist listened to exactly what I wanted", "the colour came out even better than "
            "the photo", "they made me feel completely relaxed", "the cut still looks great weeks later",
        ),
        neg=(
            "the barber took far more off than I asked", "the colour came out orange",
            "I waited forty-five minutes past my appointment", "they rushed the whole thing in ten minutes",
        ),
        aspects=("haircut", "stylist", "colour", "salon"),
        pos_verdict=("I've found my salon for life", "Book them", "Already booked my next visit"),
        neg_verdict=("I won't be going back", "Go elsewhere", "Never again"),
        bad_things=("a fringe cut at an angle", "a bill twice the quoted price"),
        low_hopes=("a walk-in barber at the station", "a salon I picked at random"),
        high_hopes=("the salon all the celebrities use", "a stylist with a three-month waiting list"),
    ),
    Domain(
        "delivery",
        pos=(
            "the parcel arrived a day early", "the driver carried it all the way upstairs",
            "the tracking was accurate to the minute", "everything was packed carefully",
        ),
        neg=(
            "the box arrived crushed", "the courier left it in the rain", "half the order was missing",
            "they marked it delivered when it wasn't",
        ),
        aspects=("delivery", "courier", "packaging", "tracking"),
        pos_verdict=("Great service", "I'll order from them again", "Faultless"),
        neg_verdict=("Never using them again", "Order elsewhere", "Useless service"),
        bad_things=("a fragile vase packed in a paper bag", "a 'next day' delivery that took two weeks"),
        low_hopes=("the cheapest delivery option", "a courier with terrible online ratings"),
        high_hopes=("a premium next-day service", "a shop with such good ratings"),
    ),
    Domain(
        "rental",
        pos=(
            "the cottage was cosy and spotlessly clean", "the host left fresh bread and local cheese",
            "the garden was a lovely place for breakfast", "the kitchen had everything we needed",
        ),
        neg=(
            "the flat smelled of damp", "the host cancelled the day before we arrived",
            "the heating didn't work in the middle of winter", "there were mice in the kitchen",
        ),
        aspects=("cottage", "host", "kitchen", "beds"),
        pos_verdict=("We've already booked it for next summer", "A lovely little retreat",
                     "Highly recommended"),
        neg_verdict=("We left after one night", "Look elsewhere", "Avoid this listing"),
        bad_things=("a 'charming' cabin with no running water", "a balcony overlooking a building site"),
        low_hopes=("a cabin with no reviews", "a flat that cheap in the city centre"),
        high_hopes=("a villa with a private pool", "a listing with a hundred glowing reviews"),
    ),
)  # fmt: skip

# Mirrors of the clauses above, same nouns, other polarity: "curry", "battery" or "staff" must not be a
# label cue by themselves. Without these, each noun sat in clauses of one polarity only, and the adapter
# learnt the nouns (a plain dev-style review mentioning a curry came out negative).
MIRRORS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # domain -> (more praise, more complaints)
    "film": (
        ("the plot hangs together beautifully", "the dialogue sounds like real people talking",
         "the jokes land every time", "the special effects are seamless", "the ending is earned and moving",
         "the lead was born for this role", "not a minute of the middle hour drags"),
        ("the performances are wooden", "the script is lazy and predictable", "the cinematography is murky",
         "the soundtrack is forgettable", "half the scenes could have been cut", "the pacing sags badly",
         "the final twist is silly"),
    ),
    "headphones": (
        ("neither earbud has ever dropped the connection", "the bass is punchy without drowning the vocals",
         "I forget I'm wearing them", "the touch controls respond every time",
         "callers say the microphone sounds crystal clear"),
        ("the sound is thin and tinny", "the noise cancelling does nothing on the train",
         "they fall out whenever I turn my head", "the battery barely lasts a commute",
         "pairing fails half the time", "the case is bulky and scratches easily"),
    ),
    "kitchen": (
        ("the kettle boils in no time and never drips", "the lid seals tightly", "the motor is whisper quiet",
         "the handle stays cool", "the coating still looks new after a year"),
        ("the coffee machine takes ages to heat up", "everything sticks to the pan",
         "the toaster browns unevenly", "the knives went blunt within weeks",
         "the mixer stalls on heavy dough", "cleaning it takes forever"),
    ),
    "phone": (
        ("it stays cool even on long video calls", "the screen survived a fall onto concrete",
         "the battery barely moves overnight", "the camera freezes fast action crisply",
         "it has never frozen once", "the speaker is loud and clear"),
        ("the screen is dim and hard to read outside", "the battery needs charging by lunchtime",
         "the photos look washed out", "it's sluggish and stutters", "updates stopped after a year",
         "it feels cheap and creaky"),
    ),
    "restaurant": (
        ("the steak was cooked exactly as I asked", "the staff were attentive without hovering",
         "the curry was rich and fragrant", "the table was beautifully set",
         "the bill was lower than we expected", "the music was soft enough to talk over",
         "the chips were crisp and hot"),
        ("the risotto was gluey and bland", "our waiter got every order wrong", "the desserts were stale",
         "the bread was hard as a rock", "the tasting menu was a string of tiny disappointments",
         "the portions are tiny for the price", "the terrace overlooks a car park"),
    ),
    "hotel": (
        ("the carpet was spotless", "the shower was hot with great pressure",
         "the staff had everything ready when we arrived", "the heating kept the room cosy",
         "the pool was warm and never crowded", "we didn't hear a sound from the next room"),
        ("the room was dusty and noisy", "the receptionist couldn't be bothered to help",
         "the breakfast was a few sad pastries", "the spa was dirty and cramped",
         "the bed sagged in the middle", "the balcony looked straight at a wall"),
    ),
    "book": (
        ("the plot is tight and gripping", "the twist caught me completely off guard",
         "the writing is fresh and surprising", "the last third races along",
         "the translation reads naturally"),
        ("the characters feel like cardboard", "the prose is overwritten",
         "I had to force myself through the last hundred pages", "the mystery is solved by chapter three",
         "the historical detail is sloppy", "the ending fell flat"),
    ),
    "app": (
        ("it remembers my login for months", "there isn't a single advert",
         "the latest update made it even faster", "it's gentle on my battery",
         "support answers emails the same day", "every feature is included in the free version"),
        ("the interface is cluttered and confusing", "syncing between my devices keeps failing",
         "it crashes several times a day", "the reminders never go off", "the support team never replied",
         "it lags even on a brand new phone"),
    ),
    "flight": (
        ("the flight left exactly on time", "the crew couldn't have been friendlier",
         "my knees had plenty of room", "our suitcases arrived safely", "we took off right on schedule",
         "the toilets were clean the whole way"),
        ("boarding was chaotic", "the cabin crew were rude", "the seats were cramped and broken",
         "we landed an hour late", "the meal was inedible", "our bags took an hour to appear"),
    ),
    "concert": (
        ("the sound was crystal clear", "the singer chatted with the crowd between songs",
         "the set felt generous", "the bar queue moved quickly", "we could see the stage from everywhere",
         "the tickets were good value"),
        ("the band sounded worse than on record", "the light show was a few flashing bulbs",
         "the crowd talked through every song", "the acoustics in the hall were awful",
         "they played for barely an hour", "the support act was painful"),
    ),
    "gym": (
        ("every machine works", "the showers are hot", "there's never a queue for the benches",
         "the staff are always on hand to help", "cancelling my membership was easy"),
        ("the equipment is old and falling apart", "the trainers ignore you",
         "the changing rooms are grimy", "it's packed every evening", "the classes are always cancelled"),
    ),
    "course": (
        ("the videos are crisp and up to date", "the quizzes match what was taught",
         "the tutor replied to every question", "the certificate is respected by employers",
         "the material is original and thorough"),
        ("the lessons jump around at random", "the teacher mumbles through hard ideas",
         "the exercises are either trivial or impossible", "after ten weeks I still can't order a coffee",
         "the feedback on assignments was one word"),
    ),
    "game": (
        ("it hasn't crashed once in fifty hours", "the story is unforgettable",
         "the servers never go down", "nothing is locked behind payments", "the frame rate is rock solid"),
        ("the levels are dull and repetitive", "the controls feel sluggish", "the soundtrack is grating",
         "the story lost me after an hour", "the online matches are full of cheaters"),
    ),
    "salon": (
        ("the barber took off exactly what I asked", "the colour came out just as I hoped",
         "I was seen the minute I arrived", "they took their time over every detail"),
        ("the stylist ignored what I wanted", "the colour faded within a week",
         "they made me feel like a nuisance", "the cut looked uneven the next day"),
    ),
    "delivery": (
        ("the box arrived without a scratch", "the courier handed it to me in person",
         "every item was there", "the driver waited while I checked everything"),
        ("the parcel arrived three days late", "the driver threw it over the fence",
         "the tracking never updated", "everything was rattling around loose in the box"),
    ),
    "rental": (
        ("the flat smelled fresh and clean", "the host was there to greet us",
         "the heating kept us toasty all week", "the kitchen was spotless"),
        ("the cottage was cramped and dirty", "the host never answered a message",
         "the garden was overgrown and full of rubbish", "the kitchen was missing basic pans"),
    ),
}  # fmt: skip


GENERIC_POS_VERDICT = (
    "Highly recommended", "Would recommend to anyone", "Five stars from me", "Really happy with it",
    "Couldn't be happier", "Absolutely loved it", "Fantastic value",
)  # fmt: skip
GENERIC_NEG_VERDICT = (
    "Not recommended", "Avoid", "A total waste of money", "Really disappointed", "One star",
    "Absolutely dreadful", "Never again",
)  # fmt: skip
SHORT_POS = (
    "Superb.", "Flawless!", "Loved it.", "Ten out of ten.", "Brilliant value.", "Would buy again.",
    "Worth every penny.", "Excellent, thank you!", "Simply wonderful.", "Ace.", "Top notch.",
    "Can't fault it.", "No complaints at all.", "Really impressed.",
)  # fmt: skip
SHORT_NEG = (
    "Rubbish.", "Never again.", "Avoid.", "Total letdown.", "Waste of money.", "Dreadful.",
    "Zero stars if I could.", "Not impressed.", "Shoddy.", "Awful, just awful.", "Do not buy.",
    "Can't recommend it.", "Not worth it.", "Meh. Expected better.",
)  # fmt: skip
POS_EMOJI = ("😍", "👍", "🎉", "😊", "🙌", "⭐⭐⭐⭐⭐")
NEG_EMOJI = ("👎", "😡", "😴", "🤮", "😤", "⭐")


def cap(s: str) -> str:
    """First character upper-cased (the rest untouched: "TV", "I'd" stay as written)."""
    return s[:1].upper() + s[1:]


def sentence(clause: str) -> str:
    return cap(clause) + ("" if clause.endswith(("!", "?", ".")) else ".")


def join_and(clauses: Sequence[str]) -> str:
    """a; a and b; a, b and c."""
    if len(clauses) == 1:
        return clauses[0]
    return ", ".join(clauses[:-1]) + " and " + clauses[-1]


# --------------------------------------------------------------------------------------------------------
# Templates: one function per phenomenon, each returns (text, label)
# --------------------------------------------------------------------------------------------------------


def verdict(rng: Random, d: Domain, label: str) -> str:
    if label == "positive":
        return sentence(rng.choice(d.pos_verdict + GENERIC_POS_VERDICT))
    pool = d.neg_verdict + GENERIC_NEG_VERDICT
    return sentence(rng.choice(pool))


# Domain-free clauses that cut against the surface cue: praise phrased with a negation, complaints phrased
# with praise words. Without them most negations sit in complaints, and the adapter learns "not" = bad.
PRAISE_WITH_NEGATION = (
    "nothing went wrong from start to finish", "there wasn't a single hitch", "I never had to wait",
    "it hasn't missed a beat since day one", "I couldn't ask for more", "not one thing disappointed",
    "no detail was overlooked", "I don't remember the last time I enjoyed something this much",
    "it never feels rushed", "there's nothing I would change",
)  # fmt: skip
COMPLAINT_WITH_PRAISE_WORDS = (
    "the best part was leaving", "the only thing that worked was the door", "the nicest thing about it "
    "was the free parking", "the glowing reviews must have been written by friends", "the highlight was "
    "the refund", "the only thing great about it was the price tag", "my favourite moment was when it "
    "ended", "it was lovely right up until we used it",
)  # fmt: skip


def side(d: Domain, label: str) -> tuple[str, ...]:
    """The domain's clauses of one polarity and their mirrors, plus 3 cue-breaking ones (rotating)."""
    extra = PRAISE_WITH_NEGATION if label == "positive" else COMPLAINT_WITH_PRAISE_WORDS
    start = 3 * DOMAINS.index(d)
    own = d.pos + MIRRORS[d.name][0] if label == "positive" else d.neg + MIRRORS[d.name][1]
    return own + tuple(extra[(start + k) % len(extra)] for k in range(3))


def other(label: str) -> str:
    return "negative" if label == "positive" else "positive"


def t_plain(rng: Random, d: Domain, label: str) -> str:
    """One-sided: one to three clauses of the same polarity, sometimes a verdict, sometimes an emoji."""
    clauses = rng.sample(side(d, label), rng.randint(1, min(3, len(side(d, label)))))
    parts = [sentence(join_and(clauses))] if rng.random() < 0.5 else [sentence(c) for c in clauses]
    if rng.random() < 0.6:
        parts.append(verdict(rng, d, label))
    text = " ".join(parts)
    if rng.random() < 0.1:
        text += " " + rng.choice(POS_EMOJI if label == "positive" else NEG_EMOJI)
    if rng.random() < 0.05:
        text = text.upper()
    return text


def t_mixed(rng: Random, d: Domain, label: str) -> str:
    """Both sides; the label's side comes last and the closing verdict settles it."""
    first = rng.sample(side(d, other(label)), rng.randint(1, 2))
    last = rng.sample(side(d, label), rng.randint(1, 2))
    form = rng.randrange(5)
    if form == 0:
        body = f"{cap(join_and(first))}, but {join_and(last)}."
    elif form == 1:
        body = f"Although {join_and(first)}, {join_and(last)}."
    elif form == 2:
        turn = rng.choice(("However", "Still", "That said", "Even so"))
        body = f"{sentence(join_and(first))} {turn}, {join_and(last)}."
    elif form == 3:
        body = f"{sentence(join_and(first))} On the other hand, {join_and(last)}."
    else:
        body = f"Yes, {join_and(first)}. But {join_and(last)}."
    return f"{body} {verdict(rng, d, label)}"


NEGATED_COMPLAINT = (  # positive: a complaint, denied
    "Not a single complaint about the {a}.", "I honestly can't fault the {a}.",
    "Nothing about the {a} disappointed me.", "The {a} never once let me down.",
    "I couldn't find anything wrong with the {a}.", "There was nothing to dislike about the {a}.",
    "No issues whatsoever with the {a}.", "The {a} wasn't bad at all. In fact it was great.",
    "I was never bored and never annoyed by the {a}.", "Not one thing about the {a} needed improving.",
)  # fmt: skip
NEGATED_PRAISE = (  # negative: praise, denied
    "The {a} was not worth the money.", "I can't recommend the {a} to anyone.",
    "Nothing about the {a} impressed me.", "The {a} never worked the way it should.",
    "I wouldn't call the {a} good by any stretch.", "Not a single thing about the {a} was enjoyable.",
    "The {a} didn't live up to the hype.", "I didn't like the {a} one bit.",
    "The {a} was nowhere near as good as promised.", "There was nothing special about the {a}.",
)  # fmt: skip


def t_negation(rng: Random, d: Domain, label: str) -> str:
    """Polarity carried by a negation: a denied complaint is praise, denied praise is a complaint."""
    pool = NEGATED_COMPLAINT if label == "positive" else NEGATED_PRAISE
    first = rng.choice(pool).format(a=rng.choice(d.aspects))
    parts = [first]
    if rng.random() < 0.5:
        parts.append(sentence(rng.choice(side(d, label))))
    if rng.random() < 0.5:
        parts.append(verdict(rng, d, label))
    if rng.random() < 0.3:  # the negated sentence is not always the first one
        rng.shuffle(parts)
    return " ".join(parts)


DOUBLE_NEG_POS = (
    "I'd be lying if I said I didn't love it.", "It's impossible not to smile at the {a}.",
    "I won't pretend I wasn't impressed by the {a}.", "There wasn't a moment I didn't enjoy.",
    "Hard not to like the {a}.", "I can't think of anything I didn't like.",
    "Nobody in our group had a bad word to say about the {a}.", "I couldn't not recommend it.",
)  # fmt: skip
DOUBLE_NEG_NEG = (
    "I'd be lying if I said I enjoyed it.", "I really can't pretend the {a} was worth it.",
    "It's hard to find anything nice to say about the {a}.", "There wasn't a moment I wasn't bored.",
    "Nobody in our group had a good word to say about the {a}.", "I can't think of anything I liked.",
    "I wouldn't say the {a} was anything but a letdown.",
    "It's not that I didn't want to like the {a}. I just didn't.",
)  # fmt: skip


def t_double_negation(rng: Random, d: Domain, label: str) -> str:
    pool = DOUBLE_NEG_POS if label == "positive" else DOUBLE_NEG_NEG
    parts = [rng.choice(pool).format(a=rng.choice(d.aspects))]
    if rng.random() < 0.6:
        parts.append(sentence(rng.choice(side(d, label))))
    if rng.random() < 0.4:
        parts.append(verdict(rng, d, label))
    return " ".join(parts)


SARCASM = (  # negative: praise words wrapped around something bad
    "Oh brilliant, {b}. Just what I was hoping for.", "Nothing says quality like {b}.",
    "Loved the {b_bare}. Truly the highlight of my year.", "Wow, {b}. Thanks so much.",
    "What a treat: {b}. I can hardly contain my joy.", "Fantastic, {b}. Really top work.",
    "Great, {b}. Exactly what I paid for, obviously.", "Five stars for {b}, I suppose. Amazing stuff.",
    "Just wonderful. {B}. Can't wait to do it all again.",
)  # fmt: skip
EXCLAIMED_PRAISE = (  # positive, with the same exclamation words, so they are not read as a sarcasm cue
    "Oh brilliant, {p}! Just what I was hoping for.", "Wow, {p}. Thanks so much!",
    "Fantastic: {p}. Really top work.", "What a treat: {p}.", "Just wonderful. {P}.",
)  # fmt: skip


def _bare(noun_phrase: str) -> str:
    """Drop a leading article: "a kettle that leaks" -> "kettle that leaks" (for "Loved the ...")."""
    return re.sub(r"^(a|an|the)\s+", "", noun_phrase)


def t_sarcasm(rng: Random, d: Domain, label: str) -> str:
    if label == "negative":
        b = rng.choice(d.bad_things)
        text = rng.choice(SARCASM).format(b=b, B=cap(b), b_bare=_bare(b))
        if rng.random() < 0.3:
            text += " " + sentence(rng.choice(d.neg))
        return text
    p = rng.choice(d.pos)
    return rng.choice(EXCLAIMED_PRAISE).format(p=p, P=cap(p))


EXPECT_LOW = (  # positive: low hopes beaten
    "I wasn't expecting much from {x}. I was wrong.", "I went in with low hopes for {x} and came out "
    "smiling.", "I was ready to be let down by {x}, but it won me over completely.",
    "Didn't think {x} would be any good. It was.", "Expected very little from {x}. Got a lot.",
    "My friends laughed when I chose {x}. Nobody's laughing now.", "I'd written off {x}. Big mistake.",
    "{X} sounded like a bad idea. It turned out to be the best call of the trip.",
    "I only tried {x} because everything else was full. Lucky me.",
)  # fmt: skip
EXPECT_HIGH = (  # negative: high hopes let down
    "I had high hopes for {x}. They were not met.", "Everyone raved about {x}, and I honestly can't see why.",
    "Expected great things from {x}. Got a shrug.", "I'd waited months for {x}. It wasn't worth it.",
    "So much hype around {x}, so little to show for it.", "I really wanted to love {x}. I didn't.",
    "{X} was supposed to be the treat of the trip. It wasn't.",
)  # fmt: skip


def t_expectation(rng: Random, d: Domain, label: str) -> str:
    """Understatement and surprise: the verdict is the gap between what was expected and what came."""
    if label == "positive":
        x = rng.choice(d.low_hopes)
        text = rng.choice(EXPECT_LOW).format(x=x, X=cap(x))
    else:
        x = rng.choice(d.high_hopes)
        text = rng.choice(EXPECT_HIGH).format(x=x, X=cap(x))
    if rng.random() < 0.4:
        text += " " + sentence(rng.choice(side(d, label)))
    return text


def t_short(rng: Random, d: Domain, label: str) -> str:
    return rng.choice(SHORT_POS if label == "positive" else SHORT_NEG)


def t_long(rng: Random, d: Domain, label: str) -> str:
    """Four to seven sentences, mostly the label's side, one or two from the other, verdict last."""
    mine = rng.sample(side(d, label), min(len(side(d, label)), rng.randint(2, 4)))
    theirs = rng.sample(side(d, other(label)), rng.randint(1, 2))
    parts = [sentence(c) for c in mine]
    for c in theirs:  # the other side somewhere in the middle: "to be fair", "admittedly"
        aside = rng.choice(("Admittedly", "To be fair", "Granted", "Sure"))
        parts.insert(rng.randint(1, len(parts) - 1) if len(parts) > 1 else 0, f"{aside}, {c}.")
    parts.append(verdict(rng, d, label))
    return " ".join(parts)


# Hand-written, domain-free sentences whose polarity a bag of words gets wrong: understatement, praise by
# denial, faint praise, sarcasm, "X but Y" where Y decides. Written for this file, not taken from any
# benchmark or dev row; main() checks each against the benchmark.
HARD_POS = (
    "I didn't regret a single penny.", "Not once did I wish I'd gone somewhere else.",
    "It's been months and I still haven't found a fault.",
    "I can't remember the last time I was this pleased with a purchase.",
    "No complaints, no hassle, no regrets.", "Nothing fancy, but it does the job beautifully.",
    "I never thought I'd say this about a budget brand, but I'm a convert.",
    "It wasn't love at first sight, but it grew on me and now I adore it.",
    "Doubted it at first. Not anymore.", "Skeptical going in, grinning coming out.",
    "I kept waiting for something to go wrong. Nothing did.", "You won't find better for the price.",
    "I'd be surprised if anyone left disappointed.", "Couldn't have asked for a nicer evening.",
    "My only complaint is that it ended.", "The only thing I'd change is how long I waited to try it.",
    "It doesn't look like much from outside, but don't let that put you off.",
    "Not the cheapest, but you get what you pay for, and then some.", "The reviews undersold it.",
    "Friends warned me off it. They were wrong.", "It's hard to overstate how much we enjoyed ourselves.",
    "There's no way I'm going anywhere else now.", "Not a single dull moment.", "I didn't want it to end.",
    "I've told half my office about it already.", "Zero issues after a year of daily use.",
    "I underestimated it badly, and I'm glad I did.", "Don't listen to the grumpy reviews: it's lovely.",
    "Unassuming, reliable and a joy to use.", "No bells and whistles, just quietly excellent.",
)  # fmt: skip
HARD_NEG = (
    "Great idea, terrible execution.", "Lovely to look at, useless in practice.",
    "Nice packaging. Shame about what was inside.", "Impressive how quickly it fell apart.",
    "Thanks for nothing.", "I've had better experiences at the tax office.",
    "If you enjoy wasting an afternoon, go for it.", "Well, that was an evening I'll never get back.",
    "It works, when it feels like it.", "Looks premium, feels like a toy.",
    "Five stars for the photos, one for the reality.", "I wanted to love it. I really did.",
    "Not exactly what I'd call value for money.", "Hardly the bargain it claims to be.",
    "Let's say it didn't live up to the brochure.",
    "Lasted about as long as the warranty, and not a day more.", "Somehow even worse than the first time.",
    "A lot of promises and very little delivered.", "The staff smiled a lot, which didn't fix anything.",
    "Cute idea, shame it doesn't work.", "I've seen more excitement at a bus stop.",
    "Beautiful setting, shame about everything else.", "Sure, it's cheap. There's a reason.",
    "Top marks for the marketing, none for the product.", "It does one thing well: disappoint.",
    "Tried to give it a chance. Twice. I'm done.", "Wonderful, another update that breaks everything.",
    "What a lovely surprise: a bill for twice the quote.", "Polite staff, pleasant music, inedible food.",
    "Good luck getting anyone to answer the phone.",
)  # fmt: skip


# "Loved doing X": sarcastic when X is an ordeal, sincere when it is a pleasure. Both, so that the opening
# praise word is no cue on its own and only what was done decides.
ORDEALS = (
    "spending two hours on hold", "paying extra for a room with no window", "finding a hair in my soup",
    "being charged twice for the same ticket", "waiting all day for a parcel that never came",
    "hearing every word of the neighbours' argument", "standing for the whole four-hour train ride",
    "lying awake listening to the fridge hum", "reading the same error message for the hundredth time",
    "assembling it twice because the instructions were wrong", "watching the battery drop while I looked "
    "at it", "queueing in the rain for a table we'd booked", "scraping burnt cheese off a brand new pan",
    "chasing the landlord for a week about the boiler",
)  # fmt: skip
PLEASURES = (
    "sitting on the terrace watching the sunset", "being greeted by name every morning",
    "finding a handwritten welcome note in the room", "having it unboxed and running in minutes",
    "reading it in a single weekend", "trying every dish on the sharing menu",
    "singing along with a thousand strangers", "cooking with it every night this week",
    "strolling to the beach in two minutes", "discovering a new favourite author",
)  # fmt: skip
ORDEAL_FORMS = (
    "Loved {g}. {c}", "Really enjoyed {g}. {c}", "Nothing beats {g}. {c}", "Absolutely adored {g}.",
    "{G}: what a fun way to spend a day off.", "There's no better way to relax than {g}. {c}",
)  # fmt: skip
ORDEAL_CLOSERS = (
    "Would do it again, obviously.", "Ten out of ten, truly.", "What a time to be alive.",
    "Just what every trip needs.", "The memories will last forever.", "Highly recommended, if you hate "
    "yourself.", "Can't wait for round two.",
)  # fmt: skip
PLEASURE_FORMS = (
    "Loved {g}. {c}", "Really enjoyed {g}. {c}", "Nothing beats {g}. {c}", "Absolutely adored {g}.",
    "{G}: what a lovely way to spend a day off.",
)  # fmt: skip


def t_loved_doing(rng: Random, d: Domain, label: str) -> str:
    if label == "negative":
        g, forms, closer = rng.choice(ORDEALS), ORDEAL_FORMS, rng.choice(ORDEAL_CLOSERS)
    else:
        g, forms, closer = rng.choice(PLEASURES), PLEASURE_FORMS, verdict(rng, d, label)
    return rng.choice(forms).format(g=g, G=cap(g), c=closer)


def t_hard(rng: Random, d: Domain, label: str) -> str:
    """A hand-written hard sentence, alone or next to a plain clause of the same polarity."""
    text = rng.choice(HARD_POS if label == "positive" else HARD_NEG)
    if rng.random() < 0.5:
        extra = sentence(rng.choice(side(d, label)))
        text = f"{text} {extra}" if rng.random() < 0.5 else f"{extra} {text}"
    return text


TEMPLATES: dict[str, Callable[[Random, Domain, str], str]] = {
    "plain": t_plain,
    "mixed": t_mixed,
    "negation": t_negation,
    "double-negation": t_double_negation,
    "sarcasm": t_sarcasm,
    "expectation": t_expectation,
    "short": t_short,
    "long": t_long,
    "hard": t_hard,
    "loved-doing": t_loved_doing,
}


# --------------------------------------------------------------------------------------------------------
# Dev set: hand-written, hard, for tuning only (never trained on, never the benchmark)
# --------------------------------------------------------------------------------------------------------

DEV_REVIEWS: tuple[tuple[str, str], ...] = (
    ("positive", "I didn't hate a single minute of it, and I normally can't sit through musicals."),
    ("positive", "Nobody was more surprised than me when the cheap blender outlived the expensive one."),
    ("positive", "The lobby looks tired and parking is a nightmare, yet the rooms are huge and the staff "
     "treat you like family. Would return."),
    ("positive", "Hard to believe a two-euro pastry could taste this good."),
    ("positive", "My expectations were low. They were blown away."),
    ("positive", "It isn't flashy, it isn't cheap, and it isn't going anywhere: best boots I've owned."),
    ("positive", "The trailer made it look silly. The film itself is anything but."),
    ("positive", "Two years on, the vacuum still works like the day it arrived."),
    ("positive", "Forget the fancy places up the hill, this little taverna beats them all."),
    ("positive", "I can't stop recommending this podcast to everyone I meet."),
    ("positive", "Slow start, I'll admit, but by the end I was completely hooked."),
    ("positive", "Not cheap, not quick to arrive, but worth the wait and the price."),
    ("positive", "Nothing went wrong, which for this airline is a small miracle, and the crew were lovely."),
    ("positive", "Who knew a documentary about bees could be this gripping?"),
    ("positive", "I've returned every other mouse I tried. This one stays."),
    ("positive", "Honestly no idea why it has mixed ratings: ours has been faultless."),
    ("positive", "The waiter was a little gruff, but the fish was the freshest I've had in years and we left "
     "very happy."),
    ("positive", "Couldn't fault a thing."),
    ("positive", "Never been so glad to be proven wrong about a sequel."),
    ("positive", "Wasn't sure I'd like the colour, but now I wouldn't swap it for anything."),
    ("negative", "Sure, the lobby is pretty. Shame about the bedbugs."),
    ("negative", "What a great idea to put the only socket behind the wardrobe."),
    ("negative", "The chef clearly has talent, so why does every plate arrive cold?"),
    ("negative", "Ten minutes of charging for twenty minutes of use. Impressive, really."),
    ("negative", "I wanted to like this album so much, but I haven't made it past the third track."),
    ("negative", "It looks lovely in the photos. In real life, not so much."),
    ("negative", "Not the worst meal of my life, but nowhere near worth forty pounds."),
    ("negative", "The reviews promised a thriller; I got a two-hour nap."),
    ("negative", "Thanks for the free upgrade to a room that smelled like a wet dog."),
    ("negative", "Customer service was very polite while doing absolutely nothing to help."),
    ("negative", "Pretty box, lovely packaging, and a watch that stopped on day three."),
    ("negative", "Great if you enjoy waiting in queues for every single ride."),
    ("negative", "No one could explain why my order was cancelled, and nobody bothered to find out."),
    ("negative", "The first episode was fun. Then it never got better."),
    ("negative", "Five minutes into the tour I already wished I'd stayed at the hotel."),
    ("negative", "They call it a sofa bed. My back calls it something else."),
    ("negative", "The cast did their best with a script that gave them nothing."),
    ("negative", "Cheaper than the others and you can tell."),
    ("negative", "I had to return it twice, and the replacement isn't any better."),
    ("negative", "Still waiting for the refund they promised in March."),
)  # fmt: skip


# --------------------------------------------------------------------------------------------------------
# Held-out checks (against the benchmark) and output
# --------------------------------------------------------------------------------------------------------


def norm(s: str) -> str:
    """Lowercased, whitespace collapsed, one trailing period dropped."""
    s = " ".join(s.split()).lower()
    return s[:-1] if s.endswith(".") else s


def words(s: str) -> list[str]:
    """Lowercased word tokens, punctuation and emoji dropped: what a close paraphrase would share."""
    return re.findall(r"[^\W_]+(?:'[^\W_]+)?", s.lower())


class BenchmarkIndex:
    """The benchmark's inputs, for "is this text a copy, a container or a close paraphrase of one?"."""

    def __init__(self, bench: Sequence[dict[str, Any]], *, ngram: int = 5, max_jaccard: float = 0.5) -> None:
        self.ngram, self.max_jaccard = ngram, max_jaccard
        self.inputs = {norm(b["input"]) for b in bench}
        self.res = [re.compile(r"(?<!\w)" + re.escape(norm(b["input"])) + r"(?!\w)") for b in bench]
        self.words = [set(words(b["input"])) for b in bench]
        self.grams: set[tuple[str, ...]] = set()
        for b in bench:
            w = words(b["input"])
            self.grams.update(tuple(w[k : k + ngram]) for k in range(len(w) - ngram + 1))

    def clash(self, text: str) -> str | None:
        """Why `text` is too close to a benchmark input, or None. Both directions of containment count."""
        n = norm(text)
        if n in self.inputs:
            return "equal"
        if any(rx.search(n) for rx in self.res):
            return "contains"
        if any(re.search(r"(?<!\w)" + re.escape(n) + r"(?!\w)", b) for b in self.inputs):
            return "contained"
        w = words(text)
        if any(tuple(w[k : k + self.ngram]) in self.grams for k in range(len(w) - self.ngram + 1)):
            return f"{self.ngram}-gram"
        ws = set(w)
        for bw in self.words:
            union = ws | bw
            if union and len(ws & bw) / len(union) > self.max_jaccard:
                return "word overlap"
        return None


def build_train(index: BenchmarkIndex) -> tuple[list[dict[str, Any]], Counter[str]]:
    """N_TRAIN distinct rows, labels alternating, phenomena by KIND_WEIGHTS, domains uniform."""
    rng = Random(SEED_TRAIN)
    kinds = list(KIND_WEIGHTS)
    weights = [KIND_WEIGHTS[k] for k in kinds]
    seen: set[str] = set()
    dropped: Counter[str] = Counter()
    rows: list[dict[str, Any]] = []
    attempts = 0
    while len(rows) < N_TRAIN:
        attempts += 1
        check(attempts < 50 * N_TRAIN, f"could only draw {len(rows)} distinct rows")
        label = LABELS[len(rows) % 2]  # exactly balanced
        kind = rng.choices(kinds, weights)[0]
        domain = rng.choice(DOMAINS)
        text = TEMPLATES[kind](rng, domain, label)
        instruction = rng.choice(INSTRUCTION_PARAPHRASES) if rng.random() < P_PARAPHRASE else INSTRUCTION
        if norm(text) in seen:
            dropped["duplicate"] += 1
            continue
        if (why := index.clash(text)) is not None:
            dropped[why] += 1
            continue
        seen.add(norm(text))
        rows.append(
            {
                "id": f"sent-train-{len(rows) + 1:04d}",
                "instruction": instruction,
                "input": text,
                "expected_output": label,
                "tags": ["sentiment", f"domain:{domain.name}", kind],
            }
        )
    return rows, dropped


def build_dev(index: BenchmarkIndex, train: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    train_inputs = {norm(r["input"]) for r in train}
    rows = []
    for i, (label, text) in enumerate(DEV_REVIEWS, start=1):
        check(label in LABELS, f"bad dev label {label}")
        why = index.clash(text)
        check(why is None, f"dev review too close to the benchmark ({why}): {text!r}")
        check(norm(text) not in train_inputs, f"dev review also in training: {text!r}")
        rows.append(
            {
                "id": f"sent-dev-{i:03d}",
                "instruction": INSTRUCTION,
                "input": text,
                "expected_output": label,
                "tags": ["sentiment", "dev"],
            }
        )
    return rows


def build_replay_prompts() -> list[dict[str, str]]:
    """date-iso's replay prompts less the sentiment-labelling ones (every one names both label words)."""
    rows = read_jsonl(DATE_ISO_REPLAY)
    kept = [r for r in rows if not ("positive" in r["instruction"] and "negative" in r["instruction"])]
    # date-iso wrote 50 sentiment prompts (5 wordings x 10 texts); anything else means the file changed.
    dropped = len(rows) - len(kept)
    check(dropped == 50, f"expected to drop 50 sentiment prompts, dropped {dropped}")
    return kept


def plugin_held_out(bench_path: Path, train_path: Path) -> tuple[str, str]:
    """The plugin's own held_out verdict for the written training file against the benchmark's cases."""
    sys.path.insert(0, str(ROOT))
    from pytest_llmeval.gates import held_out, load_training_data
    from pytest_llmeval.scorers import read_benchmark

    verdict_ = held_out(read_benchmark(bench_path).cases, load_training_data(train_path))
    return verdict_.status, verdict_.message


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise RuntimeError(msg)


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    tmp.replace(path)  # atomic: a reader never sees half a file


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    bench = read_jsonl(BENCHMARK)
    check({r["instruction"] for r in bench} == {INSTRUCTION}, "the benchmark's instruction changed")
    index = BenchmarkIndex(bench)
    train, dropped = build_train(index)
    dev = build_dev(index, train)
    for text in (*HARD_POS, *HARD_NEG, *SHORT_POS, *SHORT_NEG):
        # Hand-written sentences fail loudly; generated rows that clash are merely dropped in build_train.
        # "contained": a few short ones ("Avoid.") occur inside longer benchmark reviews, and are dropped.
        why = index.clash(text)
        check(
            why in (None, "contained"), f"hand-written sentence too close to the benchmark ({why}): {text!r}"
        )
    replay = build_replay_prompts()
    for r in [*train, *dev]:
        # An input naming a label word would let the adapter copy it instead of reading the review.
        check(LABEL_RE.search(r["input"]) is None, f"label word in input: {r}")
        check(r["input"] == " ".join(r["input"].split()), f"stray whitespace in {r}")
    outputs = {
        DATA_DIR / "train.jsonl": train,
        DATA_DIR / "dev.jsonl": dev,
        DATA_DIR / "replay_prompts.jsonl": replay,
    }
    for path, rows in outputs.items():
        write_jsonl(path, rows)
        check(read_jsonl(path) == rows, f"{path} does not read back")
    status, message = plugin_held_out(BENCHMARK, DATA_DIR / "train.jsonl")
    if status != "pass":
        (DATA_DIR / "train.jsonl").unlink()  # never leave training data behind that leaks the benchmark
        raise SystemExit(f"held_out gate: {status}: {message}")
    for path, rows in outputs.items():
        print(f"wrote {path.relative_to(ROOT)} ({len(rows)} rows)")
    stats = {
        "train": {
            "labels": Counter(r["expected_output"] for r in train),
            "kinds": Counter(r["tags"][2] for r in train),
            "domains": Counter(r["tags"][1] for r in train),
            "paraphrased_instruction": sum(r["instruction"] != INSTRUCTION for r in train),
            "dropped": dropped,
        },
        "dev": {"labels": Counter(r["expected_output"] for r in dev)},
        "held_out": f"{status}: {message}",
    }
    print(json.dumps(stats, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
