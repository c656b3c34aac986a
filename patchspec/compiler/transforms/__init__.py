"""The transform registry: one small module per kind, each ``(TargetContext, params) -> (line, edits)``."""
from patchspec.compiler.transforms.add_argument import add_argument
from patchspec.compiler.transforms.add_import import add_import
from patchspec.compiler.transforms.class_member import add_attribute, add_method
from patchspec.compiler.transforms.insert import insert_after, insert_before
from patchspec.compiler.transforms.loop_guard import loop_guard
from patchspec.compiler.transforms.wrap import wrap

TRANSFORMS = {
    "insert_before": insert_before,
    "insert_after": insert_after,
    "wrap": wrap,
    "add_argument": add_argument,
    "loop_guard": loop_guard,
    "add_method": add_method,
    "add_attribute": add_attribute,
    "add_import": add_import,
}
