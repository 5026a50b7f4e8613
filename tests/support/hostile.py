"""Generated hostile values (hypothesis strategies) for the tests that pass sweep values
through the launcher, a shell and the rules' quoting."""

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Any text a UTF-8 YAML file can hold except NUL (which no argv can carry); biased
# towards what a shell would act on.
SHELL_BITS = st.sampled_from(["$(touch pwned)", "`touch pwned`", "; touch pwned", "'", '"', "\\", "\n", "$HOME", "*",
                              "&&", "|", ">", "<", "~", "#", " ", "${IFS}", "!", "-x", "--mca"])  # fmt: skip
VALUES = st.lists(
    st.one_of(SHELL_BITS, st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=8)),
    max_size=6,
).map("".join)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
