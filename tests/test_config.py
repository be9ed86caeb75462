"""Configuration layers: file < environment < flags; keys stay secret and go only where they belong."""

from __future__ import annotations

import pytest

from typedrag.config import ConfigError, load_settings


@pytest.fixture(autouse=True)
def no_config_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "typedrag.toml"
    path.write_text("")
    monkeypatch.setenv("TYPEDRAG_CONFIG", str(path))
    return path


def test_file_then_env_then_flags(no_config_file):
    no_config_file.write_text('index = "from-file"\n[llm]\nmodel = "file-model"\ntimeout = 5\n')
    assert load_settings(env={}).llm.model == "file-model"
    settings = load_settings(env={"TYPEDRAG_LLM": "env-model", "TYPEDRAG_INDEX": "from-env"})
    assert (settings.llm.model, str(settings.index), settings.llm.timeout) == ("env-model", "from-env", 5)
    flagged = load_settings({"llm.model": "flag-model", "index": None}, env={"TYPEDRAG_LLM": "env-model"})
    assert (flagged.llm.model, str(flagged.index)) == ("flag-model", "from-file")


def test_typedrag_key_wins_over_openai_key_and_is_secret():
    settings = load_settings(env={"OPENAI_API_KEY": "sk-openai", "TYPEDRAG_API_KEY": "sk-typedrag"})
    assert settings.llm.api_key.get_secret_value() == "sk-typedrag"
    assert "sk-typedrag" not in repr(settings) and "sk-typedrag" not in settings.model_dump_json()


def test_judge_inherits_the_key_only_for_the_same_endpoint():
    env = {"TYPEDRAG_API_KEY": "sk-gen", "TYPEDRAG_BASE_URL": "https://a.example/v1"}
    same = load_settings({"judge.model": "big", "judge.base_url": "https://a.example/v1"}, env=env)
    assert same.judge.api_key.get_secret_value() == "sk-gen"
    other = load_settings({"judge.model": "big", "judge.base_url": "https://b.example/v1"}, env=env)
    assert other.judge.api_key is None


def test_invalid_values_are_a_clear_config_error(no_config_file):
    with pytest.raises(ConfigError, match="concurrency"):
        load_settings(env={"TYPEDRAG_CONCURRENCY": "0"})
    no_config_file.write_text("index = [unclosed")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(env={})


def test_knowledge_is_set_in_the_file_the_environment_or_a_flag_and_reaches_the_pipeline(no_config_file, small_index):
    from typedrag.factory import Resources, build_pipeline

    assert load_settings(env={}).knowledge == "documents"  # the default: nothing unsourced
    no_config_file.write_text(f'knowledge = "labelled"\nindex = "{small_index}"\n')
    settings = load_settings(env={})
    assert settings.knowledge == "labelled"
    assert build_pipeline(settings, Resources(), need_classifier=False).settings.knowledge == "labelled"
    assert load_settings({"knowledge": "documents"}, env={}).knowledge == "documents"
    assert load_settings(env={"TYPEDRAG_KNOWLEDGE": "documents"}).knowledge == "documents"
    with pytest.raises(ConfigError, match="knowledge"):
        load_settings({"knowledge": "everything"}, env={})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('indx = "my-index"\n', "unknown key 'indx' in config file {path}; did you mean 'index'?"),
        ('[llm]\nmodle = "gpt-4o-mini"\n', "unknown key 'llm.modle' in config file {path}; did you mean 'llm.model'?"),
        ("[judge]\ntimout = 30\n", "unknown key 'judge.timout' in config file {path}; did you mean 'judge.timeout'?"),
        (
            'model = "gpt-4o-mini"\n',
            "unknown key 'model' in config file {path}; did you mean 'llm.model'?",
        ),  # outside its section
        ('[lm]\nmodel = "gpt-4o-mini"\n', "unknown key 'lm' in config file {path}; did you mean 'llm'?"),
        ("top-k = 4\n", "unknown key 'top-k' in config file {path}; did you mean 'top_k'?"),
        ("colour = 'blue'\n", "unknown key 'colour' in config file {path}; the keys are index, backend,"),
    ],
)
def test_a_key_the_settings_do_not_have_is_an_error_naming_it_the_file_and_the_nearest_key(
    no_config_file, text, message
):
    """Issue 55 E11: a misspelled key in typedrag.toml was silently ignored, leaving its setting at the default."""
    no_config_file.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_settings(env={})
    assert str(error.value).startswith(message.format(path=no_config_file)) and "\n" not in str(error.value)


def test_every_key_the_readme_shows_is_known(no_config_file):
    no_config_file.write_text(
        'index = "my-index"\ncache_dir = "~/.cache/typedrag"\n[llm]\nmodel = "m"\ntimeout = 60\n'
        'max_retries = 3\nconcurrency = 8\n[judge]\nmodel = "j"\n'
    )
    assert load_settings(env={}).judge.model == "j"
