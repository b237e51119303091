"""Demo gateway scripts for the simulator pump."""


@gateway(timeout_ms=2000)
def set_speed(args):
    qv = system.tag.read(["Line1/Pump/Speed"])[0]
    status = system.tag.write(["Line1/Pump/Setpoint"], [args["rpm"]])[0]
    return {"speed_now": qv.value, "speed_quality": qv.quality, "written": status == "Good"}


def start(args):
    return {"written": system.tag.write(["Line1/Pump/Running"], [True])[0] == "Good"}


def stop(args):
    return {"written": system.tag.write(["Line1/Pump/Running"], [False])[0] == "Good"}
