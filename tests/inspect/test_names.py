"""A model's name is data (the same in every language); headings and titles show it in the reader's language."""

import pytest

from attnlab.i18n import _, set_language
from attnlab.inspect import RandomModel, RandomModelConfig, shown_name
from attnlab.inspect.names import RANDOM, TEMPLATES, TRAINED_GPT, TRANSLATION


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("value", ["7", "out (2)", "日期 run"])  # fields may hold spaces, brackets, CJK
def test_every_template_is_shown_translated_with_its_fields(template, value):
    fields = {f: value for f in ("mechanism", "seed", "name") if "{" + f + "}" in template}
    name = template.format(**fields)
    assert shown_name(name) == name  # English: as made
    set_language("zh")
    assert shown_name(name) == _(template).format(**fields) != name


def test_the_random_model_keeps_its_english_name_in_chinese():
    set_language("zh")
    model = RandomModel(RandomModelConfig("scaled", seed=123))
    assert model.name == "random scaled (seed 123)" == RANDOM.format(mechanism="scaled", seed=123)
    assert shown_name(model.name) == "随机缩放点积模型（种子 123）"
    assert shown_name(TRANSLATION.format(name="dates")) == "翻译模型（dates）"
    assert shown_name(TRAINED_GPT.format(name="out")) == "训练好的 GPT（out）"


def test_other_names_pass_through_and_catalog_labels_are_translated():
    set_language("zh")
    assert shown_name("all-MiniLM-L6-v2") == "all-MiniLM-L6-v2" and shown_name("") == ""
    assert shown_name("Causal") == _("Causal") != "Causal"  # the report's mechanism labels are catalog messages
    assert shown_name("random scaled seed 123") == "random scaled seed 123"  # not the template's shape
