"""Runs a function on several threads at once and says what they raised."""
import threading


def in_threads(work, args_list, timeout: float = 120) -> list:
    """Runs work(*args) on a thread of its own for each args, waits for them all and returns the
    exceptions they raised (asserting that every thread ended within `timeout` seconds)."""
    errors = []

    def run(*args):
        try:
            work(*args)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run, args=tuple(a)) for a in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread did not end"
    return errors
