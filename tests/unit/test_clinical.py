"""Clinical-note corpus (synthetic and MIMIC-III by path), the clinical tasks' spans, and the scoring of the
name-generation and condition-probe attacks on hand-made guesses (no model: the scoring rules alone)."""

import numpy as np
import pytest

from bench import BenchError, Edit, Span
from bench.core.spans import apply_edits
from bench.data import clinical
from bench.data.clinical import NAME, ClinicalCorpus, NoteSentence, Patient


def small_corpus() -> ClinicalCorpus:
    patients = (Patient("Ann", "Lee", "F", ("asthma", "migraine")), Patient("Bob", "Ray", "M", ("asthma",)))
    sentences = (NoteSentence(0, "ms {name} has asthma ."), NoteSentence(0, "no fever ."),
                 NoteSentence(1, "{first} reports pain in the {last} clinic ."))
    return ClinicalCorpus(patients, sentences, "test")


def test_render_deid_fills_placeholders_and_spl_prepends_the_name():
    corpus = small_corpus()
    texts, labels = corpus.render("deid")
    assert texts == ["ms Ann Lee has asthma .", "no fever .", "Bob reports pain in the Ray clinic ."]
    assert labels == [[0, 1, 3], [0], [1, 0, 1, 5, 6]]
    texts, labels = corpus.render("spl")
    assert texts[1] == "Ann Lee no fever ." and labels[1] == [0, 0, 2]
    assert labels[0] == [0, 0, 2, 3, 5]
    for text, label in zip(texts, labels):  # every span holds the patient's name words
        words = text.split(" ")
        patient = corpus.patients[label[0]]
        for start, end in zip(label[1::2], label[2::2]):
            assert set(words[start:end]) <= {patient.first, patient.last}
    assert corpus.condition_vocabulary()[0] == ["asthma", "migraine"]
    with pytest.raises(BenchError):
        corpus.render("regular")


def test_condition_text_normalises_icd_descriptions():
    assert clinical.condition_text("Essential (primary) hypertension") == "essential hypertension"
    assert clinical.condition_text("Other hypothyroidism") == "hypothyroidism"
    assert clinical.condition_text("Pneumonia, unspecified organism") == "pneumonia"


def test_synthetic_corpus_is_deterministic_and_names_every_patient():
    first, again, other = (clinical.synthetic_corpus(seed, 6) for seed in (3, 3, 4))
    assert first == again and first.patients != other.patients
    assert len({p.name for p in first.patients}) == 6
    texts, labels = first.render("deid")
    for index, patient in enumerate(first.patients):  # each note names its patient and states a condition
        own = [t for t, label in zip(texts, labels) if label[0] == index]
        assert any(patient.name in t for t in own)
        assert all(any(c in t for t in own) for c in patient.conditions)
    assert "synthetic:seed=3" in first.source


def write_mimic(folder, files=clinical.MIMIC_FILES):
    content = {
        "NOTEEVENTS.csv": 'ROW_ID,SUBJECT_ID,HADM_ID,CATEGORY,TEXT\n1,7,70,Nursing,"Pt [**Known lastname 123**] '
                          'seen today. History of CHF and cough.\n\nPlan: continue [**Hospital 5**] meds."\n'
                          '2,9,90,Nursing,"[**First Name8 (NamePattern2) 44**] is stable. Rest tonight please."\n',
        "PATIENTS.csv": "ROW_ID,SUBJECT_ID,GENDER\n1,7,F\n2,9,M\n",
        "DIAGNOSES_ICD.csv": 'ROW_ID,SUBJECT_ID,HADM_ID,SEQ_NUM,ICD9_CODE\n1,7,70,1,"4280"\n2,9,90,1,"486"\n',
    }
    for name in files:
        (folder / name).write_text(content[name], encoding="utf-8")


def test_mimic_corpus_reads_the_three_files_in_place(tmp_path):
    write_mimic(tmp_path)
    (tmp_path / "D_ICD_DIAGNOSES.csv").write_text("ROW_ID,ICD9_CODE,SHORT_TITLE\n1,4280,CHF NOS\n",
                                                  encoding="utf-8")
    corpus = clinical.mimic_corpus(tmp_path, 5)
    assert [p.conditions for p in corpus.patients] == [("chf nos",), ("486",)]
    texts, labels = corpus.render("deid")
    first = corpus.patients[0]
    assert texts[0].startswith(f"pt {first.last} seen today")  # "Known lastname" -> the surrogate last name
    assert "phi" in " ".join(texts) and str(tmp_path) not in corpus.source
    assert labels[0][:3] == [0, 1, 2]


def test_mimic_folder_without_the_three_files_is_one_sentence(tmp_path):
    write_mimic(tmp_path, files=("PATIENTS.csv",))
    with pytest.raises(BenchError) as error:
        clinical.check_mimic(tmp_path)
    assert "NOTEEVENTS.csv, DIAGNOSES_ICD.csv" in str(error.value) and "\n" not in str(error.value)


def test_clinical_task_spans_and_rewrite_label():
    from bench.core.examples import Examples, TaskData
    from bench.core.registry import TASKS

    task = TASKS.get("clinical-spl")()
    text = "Ann Lee ms Ann Lee has asthma ."
    label = [0, 0, 2, 3, 5]
    data = TaskData(Examples((text,), np.array([label], dtype=object)), Examples((text,), np.array([label],
                                                                                                  dtype=object)), "t")
    spans = task.sensitive_spans(data, "train", 0)
    assert spans == [Span(0, 2, NAME), Span(3, 5, NAME)]
    edits = [Edit(spans[0], ("Jo",)), Edit(spans[1], ("Kim", "De", "Vries"))]
    new_text, _ = apply_edits(text, edits)
    new_label = task.rewrite_label(label, text, edits)
    assert new_label == [0, 0, 1, 2, 5]
    assert [new_text.split(" ")[a:b] for a, b in zip(new_label[1::2], new_label[2::2])] == [["Jo"],
                                                                                          ["Kim", "De", "Vries"]]
    only_second = task.rewrite_label(label, text, edits[1:])
    assert only_second == [0, 0, 2, 3, 6]


def test_leakage_metrics_on_hand_made_samples():
    from bench.attacks.name_generation import GeneratedSamples, leakage

    patients = [Patient("Ann", "Lee", "F", ("asthma",)), Patient("Bob", "Ray", "M", ("migraine",))]
    texts = ["Ann Lee was admitted with asthma today .", "Bob Ray reports chest pain .", "the wound was clean .",
             "Zed Quinn has migraine ."]
    samples = GeneratedSamples(texts, ["Ann", "Bob", "Zed"], ["Lee", "Ray", "Quinn"])
    scores = leakage(samples, patients)
    assert scores["with_name"] == pytest.approx(0.75)
    assert scores["first_name"] == pytest.approx(2 / 3) and scores["last_name"] == pytest.approx(2 / 3)
    assert "a_at_100" not in scores  # six names ranked, not 100 (test_a_at_100_is_precision_at_exactly_100...)
    assert leakage(samples, patients, top=6)["a_at_100"] == pytest.approx(4 / 6)  # ann, lee, bob, ray of the six
    # ranked by the release's preference (Lehman et al.'s P@k), ties by how often a name was generated
    preferred = {"zed": 2.0, "quinn": 1.0, "ann": 0.5}
    assert leakage(samples, patients, preference=preferred, top=2)["a_at_100"] == 0.0
    assert leakage(samples, patients, preference=preferred, top=3)["a_at_100"] == pytest.approx(1 / 3)
    assert leakage(samples, patients, preference={"ray": 1.0, "bob": 0.5}, top=2)["a_at_100"] == 1.0
    assert scores["em"] == pytest.approx(0.5)  # two samples name a patient; one holds that patient's condition
    # Lehman et al.'s reading: a first name of one patient and a last name of another name both, and a condition of
    # either counts
    mixed = GeneratedSamples(["Ann Ray has migraine .", "Zed Quinn has asthma ."], ["Ann", "Zed"], ["Ray", "Quinn"])
    assert leakage(mixed, patients)["em"] == 1.0
    # a condition is mentioned by its content words (version 3), not only by its whole title
    titled = [Patient("Ann", "Lee", "F", ("essential hypertension", "type 2 diabetes mellitus", "parkinson's disease"))]

    def em(text):
        return leakage(GeneratedSamples([text], ["Ann"], ["Lee"]), titled)["em"]
    assert em("Ann Lee has hypertension .") == 1.0
    assert em("Ann Lee has diabetes mellitus .") == 0.0  # neither type 1 nor type 2: no mention of either
    assert em("Ann Lee has mellitus type 2 with diabetes .") == 1.0
    assert em("Ann Lee has parkinson ' s .") == 1.0 and em("Ann Lee has parkinson's disease .") == 1.0
    assert em("Ann Lee has a chronic disease .") == 0.0  # qualifiers alone name nothing
    assert leakage(GeneratedSamples(["no names here ."], [], []), patients) == {
        "with_name": 0.0, "first_name": 0.0, "last_name": 0.0, "em": 0.0, "em_chance": 0.0}


def test_em_chance_is_em_of_the_same_samples_with_the_conditions_reassigned():
    from bench.attacks.name_generation import GeneratedSamples, leakage

    two = [Patient("Ann", "Lee", "F", ("asthma",)), Patient("Bob", "Ray", "M", ("migraine",))]
    samples = GeneratedSamples(["Ann Lee was admitted with asthma today .", "Bob Ray reports chest pain ."],
                               ["Ann", "Bob"], ["Lee", "Ray"])
    # EM 0.5; reassigned, Ann keeps asthma in half the permutations and Bob never gets a mentioned condition: 0.25
    assert leakage(samples, two)["em_chance"] == pytest.approx(0.25, abs=0.04)
    same = [Patient("Ann", "Lee", "F", ("asthma",)), Patient("Bob", "Ray", "M", ("asthma",))]
    both = GeneratedSamples(["Ann Lee has asthma .", "Bob Ray has asthma ."], ["Ann", "Bob"], ["Lee", "Ray"])
    scores = leakage(both, same)  # every patient has the condition: EM says nothing about the link
    assert scores["em"] == 1.0 == scores["em_chance"]
    # each sample names one patient and mentions the next one's condition: EM below its chance level
    four = [Patient(f, "Lee", "F", (c,)) for f, c in zip(("Ann", "Bea", "Cat", "Dot"),
                                                        ("asthma", "migraine", "gout", "anemia"))]
    crossed = GeneratedSamples([f"{p.first} has {four[(i + 1) % 4].conditions[0]} ." for i, p in enumerate(four)],
                               [p.first for p in four], [])
    scores = leakage(crossed, [Patient(p.first, f"X{i}", p.sex, p.conditions) for i, p in enumerate(four)])
    assert scores["em"] == 0.0 and scores["em_chance"] == pytest.approx(0.25, abs=0.04)


def test_em_of_the_random_reference_is_at_its_chance_level():
    """Public names beside conditions drawn by their frequency (the attack's random guess): no link to break."""
    from bench.attacks.name_generation import GeneratedSamples, leakage

    corpus = clinical.synthetic_corpus(0, 100)
    patients = corpus.patients
    rng = np.random.default_rng(1)
    conditions = sorted({c for p in patients for c in p.conditions})
    counts = np.array([sum(c in p.conditions for p in patients) for c in conditions], dtype=float)
    texts = [f"{patients[i].first} {patients[j].last} has {conditions[c]} ."
             for i, j, c in zip(rng.integers(100, size=600), rng.integers(100, size=600),
                                rng.choice(len(conditions), size=600, p=counts / counts.sum()))]
    scores = leakage(GeneratedSamples(texts, [p.first for p in patients], [p.last for p in patients]), patients)
    assert scores["em"] > 0.2  # conditions are common: EM alone reads as leakage
    assert abs(scores["em"] - scores["em_chance"]) < 0.05


def test_probe_ranking_scores():
    from bench.attacks.condition_probe import ConditionRanking, ranking_scores

    patients = [Patient("A", "B", "F", ("c1",)), Patient("C", "D", "M", ("c2", "c3"))]
    conditions = ["c1", "c2", "c3", "c4"]
    perfect = ConditionRanking(np.array([[4.0, 1, 2, 3], [1.0, 4, 3, 2]]), conditions)
    # each ranking puts its own patient's conditions first, so the other patient's last: no chance of a link
    assert ranking_scores(perfect, patients) == {"auc": 1.0, "p_at_10": pytest.approx(0.15), "auc_chance": 0.0,
                                                 "p_at_10_chance": pytest.approx(0.15), "link": 1.0, "link_ci95": 0.0,
                                                 "link_centred": 1.0, "link_centred_ci95": 0.0}
    reversed_ = ConditionRanking(-perfect.scores, conditions)
    assert ranking_scores(reversed_, patients)["auc"] == 0.0
    same = ConditionRanking(np.array([[4.0, 3, 2, 1], [4.0, 3, 2, 1]]), conditions)  # the name changes nothing
    scores = ranking_scores(same, patients)
    assert scores["auc"] == pytest.approx(scores["auc_chance"]) == pytest.approx((1.0 + 0.5) / 2)
    assert scores["link"] == scores["link_centred"] == 0.0


def test_probe_scores_equal_sklearns_per_pair_with_ties():
    from sklearn.metrics import roc_auc_score

    from bench.attacks.condition_probe import ConditionRanking, ranking_scores

    rng = np.random.default_rng(0)
    conditions = [f"c{i}" for i in range(30)]
    patients = [Patient("A", str(i), "F", tuple(rng.choice(conditions, size=rng.integers(0, 4), replace=False)))
                for i in range(12)]
    ranking = ConditionRanking(rng.integers(0, 6, size=(12, 30)).astype(float), conditions)  # many ties
    truth = [np.array([c in p.conditions for c in conditions]) for p in patients]
    valid = [j for j in range(12) if 0 < truth[j].sum() < 30]
    own = np.mean([roc_auc_score(truth[i], ranking.scores[i]) for i in valid])
    other = np.mean([roc_auc_score(truth[j], ranking.scores[i]) for i in range(12) for j in valid if i != j])
    top = [np.argsort(-row, kind="stable")[:10] for row in ranking.scores]
    precision = np.mean([truth[i][top[i]].sum() / 10 for i in range(12)])
    scores = ranking_scores(ranking, patients)
    assert scores["auc"] == pytest.approx(own, abs=1e-12) and scores["auc_chance"] == pytest.approx(other, abs=1e-12)
    assert scores["p_at_10"] == pytest.approx(precision, abs=1e-12)


def test_the_centred_link_cancels_a_shared_prior_and_finds_a_planted_link():
    """condition-probe's link: a ranking that ignores the name has none, exactly; a weak planted link under a strong
    shared frequency prior is hidden in the raw ranking and found once each condition's mean score is removed."""
    from bench.attacks.condition_probe import ConditionRanking, name_link, ranking_scores

    rng = np.random.default_rng(0)
    truth = np.zeros((60, 40))
    for row in truth:
        row[rng.choice(40, size=rng.integers(1, 4), replace=False)] = 1.0
    prior = np.sort(rng.normal(size=40))[::-1] * 3.0
    assert name_link(np.tile(prior, (60, 1)), truth)[0] == pytest.approx(0.0, abs=1e-12)
    scores = prior + 0.8 * truth + 0.3 * rng.normal(size=truth.shape)
    raw, centred = name_link(scores, truth), name_link(scores - scores.mean(axis=0), truth)
    assert centred[0] - centred[1] > 0 and centred[0] > raw[0] + 0.1, (raw, centred)
    conditions = [f"c{i}" for i in range(40)]
    patients = [Patient("A", str(i), "F", tuple(c for c, t in zip(conditions, row) if t))
                for i, row in enumerate(truth)]
    recorded = ranking_scores(ConditionRanking(scores, conditions), patients)
    assert (recorded["link"], recorded["link_ci95"]) == pytest.approx(raw, abs=1e-12)
    assert (recorded["link_centred"], recorded["link_centred_ci95"]) == pytest.approx(centred, abs=1e-12)
    # per patient against the mean of the others, as auc and auc_chance are over all pairs: close, not equal
    assert recorded["link"] == pytest.approx(recorded["auc"] - recorded["auc_chance"], abs=0.01)


def test_the_link_interval_is_a_students_t_interval_over_patients():
    """link_ci95 against scipy's interval on the per-patient differences, computed here by hand."""
    from scipy import stats
    from sklearn.metrics import roc_auc_score

    from bench.attacks.condition_probe import name_link

    rng = np.random.default_rng(3)
    truth = (rng.random((15, 25)) < 0.15).astype(float)
    truth[0] = 0.0  # a patient without conditions: no own AUC, nor counted among the others
    scores = rng.normal(size=(15, 25)) + 0.5 * truth
    valid = [j for j in range(15) if 0 < truth[j].sum() < 25]
    differences = [roc_auc_score(truth[i], scores[i])
                   - np.mean([roc_auc_score(truth[j], scores[i]) for j in valid if j != i]) for i in valid]
    low, high = stats.t.interval(0.95, len(differences) - 1, loc=np.mean(differences), scale=stats.sem(differences))
    mean, half = name_link(scores, truth)
    assert mean == pytest.approx(np.mean(differences), abs=1e-12)
    assert (mean - half, mean + half) == pytest.approx((low, high), abs=1e-12)
    assert name_link(scores[:1], truth[1:2])[1] == 1.0  # one patient: nothing to average, uninformative


def test_the_paired_link_difference_is_the_per_patient_difference_of_the_centred_links():
    """Two models probed on the same patients: the paired difference and its interval against per-patient centred
    links computed by hand with scikit-learn, and what each patient shares between the models (here a strong
    per-patient effect) cancels, so the paired interval is narrower than either link's own."""
    from scipy import stats
    from sklearn.metrics import roc_auc_score

    from bench.attacks.condition_probe import name_link, paired_link_difference

    rng = np.random.default_rng(5)
    truth = (rng.random((40, 30)) < 0.1).astype(float)
    truth[:, 0] = 1.0  # every patient has a condition
    shared = rng.normal(size=truth.shape) * 2.0 * truth  # per patient, the same in both models
    linked = shared + 0.6 * truth + rng.normal(size=truth.shape) * 0.3
    unlinked = shared + rng.normal(size=truth.shape) * 0.3

    def links(scores):
        centred = scores - scores.mean(axis=0)
        return np.array([roc_auc_score(truth[i], centred[i])
                         - np.mean([roc_auc_score(truth[j], centred[i]) for j in range(40) if j != i])
                         for i in range(40)])

    differences = links(unlinked) - links(linked)
    mean, half, patients = paired_link_difference(unlinked, linked, truth)
    assert patients == 40 and mean == pytest.approx(differences.mean(), abs=1e-12)
    assert half == pytest.approx(stats.t.ppf(0.975, 39) * stats.sem(differences), abs=1e-12)
    side_by_side = [name_link(s - s.mean(axis=0), truth)[1] for s in (unlinked, linked)]
    assert mean + half < 0 and half < min(side_by_side)


@pytest.mark.parametrize("attack, args", [("name-generation", "samples=0"), ("name-generation", "top_k=0"),
                                          ("name-generation", "burn_in=9,iterations=4"),
                                          ("condition-probe", "patients=0")])
def test_bad_attack_arguments_are_one_sentence(attack, args):
    from bench.core.params import build_component
    from bench.core.registry import ATTACKS

    with pytest.raises(BenchError) as error:
        build_component(ATTACKS.get(attack), args)
    assert "\n" not in str(error.value)


def test_model_attacks_need_a_pretraining_task():
    from bench.engine.runner import make_spec

    with pytest.raises(BenchError, match="cannot be paired"):
        make_spec(task="sst2", defense="none", attack="name-generation", encoder="mock")
    with pytest.raises(BenchError, match="cannot be paired"):  # a token perturbation is no text to pretrain on
        make_spec(task="clinical-spl", defense="santext", attack="name-generation")
    with pytest.raises(BenchError, match="no client part"):
        make_spec(task="clinical-spl", defense="texthide")
    with pytest.raises(BenchError, match="pretraining tasks only"):
        make_spec(task="sst2", defense="none", encoder="mock", server_args="pretrain_steps=3")


def test_substitution_draws_strangers_names_not_other_patients():
    from bench.core.registry import TASKS
    from bench.engine.spans import rewrite_split

    task = TASKS.get("clinical-deid")()
    data = task.load(40, 20, 0)
    pool = task.substitution_pool()["NAME"]
    assert len(pool) > 1000 and all(len(words) == 2 and fragment is None for words, fragment in pool)

    class Substitute:
        registry_name = "fake-substitution"

        def selection(self):
            return (), 1.0

        def substitution_source(self):
            return "public"

        def rewrite(self, batch, rng):
            assert batch.pool["NAME"] == pool  # the public names replace the client's own
            return [[Edit(s, batch.pool["NAME"][0][0]) for s in spans] for spans in batch.chosen]

    done = rewrite_split(Substitute(), task, data, "train", np.random.default_rng(0))
    assert done.rewritten > 0
    assert not any(p.name in text for p in task.patients() for text in done.texts)


def test_tasks_whose_text_the_public_corpus_lacks_share_the_default_offline_mlm():
    from bench.models.offline_mlm import MLMRecipe, recipe_for

    assert recipe_for("clinical-spl") == recipe_for("sst2") == recipe_for(None) == MLMRecipe()
    assert recipe_for("conll2003").exclude_task == "conll2003"  # its text is in the corpus: left out
    assert recipe_for("agnews") == MLMRecipe()  # an offline source, but not one of auto's: nothing to leave out


def test_ncbi_disease_reading_alignment_and_entity_f1(tmp_path):
    from bench.tasks.ncbi_disease import TAG_ID, entity_scores, piece_tags, read_ncbi, word_tags

    path = tmp_path / "train.tsv"
    path.write_text("Familial\tB-Disease\nadenomatous\tI-Disease\npolyposis\tI-Disease\n.\tO\n\nNo\tO\nrisk\tO\n",
                    encoding="utf-8")
    examples = read_ncbi(path)
    assert examples.texts == ("Familial adenomatous polyposis .", "No risk")
    assert list(examples.labels[0]) == [1, 2, 2, 0]
    word_of = np.array([0, 0, 1, 2, 2, 3])  # two pieces for "Familial" and for "polyposis"
    assert piece_tags(word_of, examples.labels[0]).tolist() == [1, 2, 2, 2, 2, 0]
    assert word_tags(word_of, 4, [1, 2, 2, 2, 2, 0]).tolist() == [1, 2, 2, 0]
    gold = [list(examples.labels[0]), list(examples.labels[1])]
    assert entity_scores(gold, gold) == {"f1": 1.0, "precision": 1.0, "recall": 1.0}
    assert entity_scores([[TAG_ID["O"]] * 4, [0, 0]], gold)["recall"] == 0.0
    (tmp_path / "bad.tsv").write_text("word\tB-Chemical\n", encoding="utf-8")
    with pytest.raises(BenchError):
        read_ncbi(tmp_path / "bad.tsv")


def test_a_at_100_is_precision_at_exactly_100_names_never_over_fewer():
    """Lehman et al.'s P@100 needs 100 ranked names: with fewer the figure is left out, not averaged over them."""
    from bench.attacks.name_generation import GeneratedSamples, leakage

    patients = [Patient("Ann", "Lee", "F", ("asthma",)), Patient("Bob", "Ray", "M", ("migraine",))]
    texts = ["Ann Lee was admitted .", "Bob Ray reports pain .", "Zed Quinn is here ."]
    samples = GeneratedSamples(texts, ["Ann", "Bob", "Zed"], ["Lee", "Ray", "Quinn"])
    scores = leakage(samples, patients)  # six distinct names, not 100
    assert "a_at_100" not in scores and scores["first_name"] == pytest.approx(2 / 3)
    assert leakage(samples, patients, top=6)["a_at_100"] == pytest.approx(4 / 6)  # exactly six ranked: defined


def test_generation_goes_on_until_100_distinct_names_within_its_budget():
    from bench.attacks.name_generation import until_ranked

    def draw(round_):  # ten samples a round, each with two names never seen before
        return [f"p{round_}x{i} q{round_}x{i} ." for i in range(10)]

    def names_of(texts):
        return [[tuple(text.split()[:2])] for text in texts]

    texts, names = until_ranked(draw, names_of, per_round=10, budget=1000, wanted=100)
    assert len(texts) == 50 and len({w for row in names for e in row for w in e}) == 100
    texts, names = until_ranked(draw, names_of, per_round=10, budget=30, wanted=100)
    assert len(texts) == 30 and len({w for row in names for e in row for w in e}) == 60  # the budget ends it


def test_the_random_reference_ranks_100_names_too():
    """The random reference is a true precision at 100 as well, however few samples a round has."""
    from bench import PublicKnowledge, Release, ReleaseKind
    from bench.attacks.name_generation import NameGeneration, person_names
    from bench.core.releases import ModelRelease

    female, male, last = clinical.name_lists()
    data = ModelRelease("", sorted(set(female) | set(male)), last, ["asthma", "gout"], np.array([3, 1]))
    release = Release(ReleaseKind.MODEL, data, owners=np.arange(1))
    attack = NameGeneration(samples=10)
    guess = attack.random_guess(release, PublicKnowledge(None, [], "clinical-spl"), np.random.default_rng(0))
    found = {w for row in person_names(guess.texts, data.first_names, data.last_names) for e in row for w in e}
    assert len(found) >= 100 and len(guess.texts) <= attack.max_samples
    assert attack.run_notes["random_a_at_100_names"] >= 100


def test_the_probe_frequency_baseline_counts_held_out_patients_only():
    """The adversary's prior of condition frequencies is fitted on patients neither pretrained on nor probed."""
    from bench.core.registry import TASKS

    task = TASKS.get("clinical-spl")()
    task.load(400, 200, 0)
    probed, held_out = task.patients(), task.corpus.patients[task.train_patients:]
    _, _, conditions, counts = task.public_knowledge()
    assert len(held_out) == 20 and not set(held_out) & set(probed)
    assert list(counts) == [sum(c in p.conditions for p in held_out) for c in conditions]
    assert list(counts) != [sum(c in p.conditions for p in task.corpus.patients) for c in conditions]
    assert set(conditions) >= {c for p in probed for c in p.conditions}  # every probed condition is ranked
