"""Python custom classes (opaque objects, ``register_opaque_type`` / ``register_custom_class``): discovery through torch's query functions, the class context and the object's state."""
